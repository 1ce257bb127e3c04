export * from './grammar';
export * from './caps';
export * from './label';
export * from './effects';

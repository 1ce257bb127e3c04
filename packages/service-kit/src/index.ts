export * from './errors';
export * from './logger';
export * from './config';
export * from './bus';
export * from './health';
export * from './runtime';
export * from './pull-consumer';

export * from './ids';
export * from './credentials';
export * from './topics';
export * from './acl';
export * from './sys-exe';
export * from './mqtt-string';

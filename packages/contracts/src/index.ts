export * from './generated/types';
export * from './generated/subjects';
export * from './generated/subject-types';
export * from './validators';
export { PERMISSIONS, CHANNELS } from './catalog';
export * from './system';
export * from './partner-events';

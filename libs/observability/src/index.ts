export * from './metrics';
export * from './logger';

export * from './test-stores';
export * from './wait-for';
export * from './pause-gate';
export * from './test-engine';

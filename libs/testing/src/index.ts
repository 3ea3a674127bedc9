export * from './test-stores';
export * from './wait-for';
export * from './pause-gate';
export * from './test-engine';
export * from './faulty-bus';
export * from './crashing-follow-ups';
export * from './jetstream';
export * from './scratch-database';

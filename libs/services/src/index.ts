export * from './server';
export * from './runtime/settings';
export * from './runtime/engine-runtime';
export { redactDatabaseUrl } from './runtime/redact-database-url';
export * from './runtime/tokens';
export * from './main-runner';
export * from './shutdown';
export { ApiKeyGuard, PublicRoute, AdminRoute, authenticateHeaders } from './http/api-key.guard';
export { scopeOf } from './http/scope';

/** Nest injection token of the process's `EngineRuntime`. */
export const ENGINE_RUNTIME = Symbol('ENGINE_RUNTIME');

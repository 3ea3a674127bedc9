/** The logger port the libs log through; apps pass Nest's logger, tests a silent one. */
export interface EngineLogger {
  log(message: string, meta?: Record<string, unknown>): void;
  warn(message: string, meta?: Record<string, unknown>): void;
  error(message: string, meta?: Record<string, unknown>): void;
}

export const silentLogger: EngineLogger = { log: () => undefined, warn: () => undefined, error: () => undefined };

/** One JSON line per entry on stdout/stderr. */
export const consoleLogger: EngineLogger = {
  log: (message, meta) => console.log(JSON.stringify({ level: 'info', message, ...meta })),
  warn: (message, meta) => console.warn(JSON.stringify({ level: 'warn', message, ...meta })),
  error: (message, meta) => console.error(JSON.stringify({ level: 'error', message, ...meta })),
};

import { Writable } from 'node:stream';
import { ConsoleLogger, Logger } from '@nestjs/common';
import { createProcessLogger } from '@ironflow/observability';
import { NestPinoLogger } from './nest-logger';

function capture(level: 'info' | 'debug') {
  const out: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      for (const l of String(chunk).split('\n')) if (l) out.push(JSON.parse(l));
      done();
    },
  });
  return { logger: new NestPinoLogger(createProcessLogger({ service: 'svc', level, destination: stream })), out };
}

describe("Nest's logs through the process logger", () => {
  it("puts Nest's route mapping and module loading at debug, so an info log has none of it", () => {
    const { logger, out } = capture('info');
    logger.log('Mapped {/api/v1/runs, GET} route', 'RouterExplorer');
    logger.log('RestController {/api/v1}:', 'RoutesResolver');
    logger.log('CoreModule dependencies initialized', 'InstanceLoader');
    logger.log('something the app says', 'http');
    expect(out).toEqual([expect.objectContaining({ level: 'info', msg: 'something the app says', context: 'http' })]);

    const verbose = capture('debug');
    verbose.logger.log('Mapped {/api/v1/runs, GET} route', 'RouterExplorer');
    expect(verbose.out).toEqual([expect.objectContaining({ level: 'debug', context: 'RouterExplorer' })]);
  });

  it("puts Nest's slow module serialization warning at debug: no warning noise at start on a busy machine", () => {
    const { logger, out } = capture('info');
    logger.warn('The module "InternalCoreModule" is taking 87.13ms to serialize, this may be caused by larger objects statically assigned to the module. More details: https://github.com/nestjs/nest/issues/12738', 'ModuleTokenFactory');
    logger.warn('a real warning', 'http');
    expect(out).toEqual([expect.objectContaining({ level: 'warn', msg: 'a real warning' })]);
  });

  it('keeps the stack of an error as a field of the one JSON line', () => {
    const { logger, out } = capture('info');
    logger.error('handler failed', 'Error: handler failed\n    at x (y.ts:1:1)', 'http');
    expect(out).toEqual([expect.objectContaining({ level: 'error', msg: 'handler failed', context: 'http', stack: 'Error: handler failed\n    at x (y.ts:1:1)' })]);
  });

  it("receives what a Nest `Logger` instance writes once Nest uses it", () => {
    const { logger, out } = capture('info');
    Logger.overrideLogger(logger);
    try {
      new Logger('audit').warn('slow');
    } finally {
      Logger.overrideLogger(new ConsoleLogger());
    }
    expect(out).toEqual([expect.objectContaining({ level: 'warn', msg: 'slow', context: 'audit' })]);
  });
});

import { Writable } from 'node:stream';
import { runFields } from './log-fields';
import { createProcessLogger } from './process-logger';

/** A destination that keeps each written line. */
function lines(): { stream: Writable; lines: string[] } {
  const out: string[] = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      out.push(...String(chunk).split('\n').filter((l) => l !== ''));
      done();
    },
  });
  return { stream, lines: out };
}

describe('the process logger', () => {
  it('writes one JSON object per line: level label, ISO time, service, msg and the fixed snake_case run fields', () => {
    const { stream, lines: out } = lines();
    const logger = createProcessLogger({ service: 'dispatcher', destination: stream });
    logger.warn('push report not applied', { ...runFields({ id: 'run-1', executionSeq: 3, functionId: 'pay' }, { stepId: 'charge', workerId: 'w-1' }), error: 'boom' });
    expect(out).toHaveLength(1);
    const line = JSON.parse(out[0]);
    expect(line).toEqual({
      level: 'warn',
      time: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      service: 'dispatcher',
      msg: 'push report not applied',
      run_id: 'run-1',
      execution_seq: 3,
      function_id: 'pay',
      step_id: 'charge',
      worker_id: 'w-1',
      error: 'boom',
    });
    expect(out[0]).not.toMatch(/\x1b\[/);
  });

  it('drops lines under its level, and a child carries its fields on every line', () => {
    const { stream, lines: out } = lines();
    const logger = createProcessLogger({ service: 'api-gateway', level: 'warn', destination: stream }).child({ node_id: 'gw-1' });
    logger.log('not shown');
    logger.debug('not shown either');
    logger.error('shown');
    expect(out.map((l) => JSON.parse(l))).toEqual([expect.objectContaining({ level: 'error', msg: 'shown', node_id: 'gw-1' })]);
    logger.level = 'info';
    logger.log('now shown');
    expect(JSON.parse(out[1])).toMatchObject({ level: 'info', msg: 'now shown' });
  });

  it('runFields leaves out what the run does not carry', () => {
    expect(runFields({ id: 'r' })).toEqual({ run_id: 'r' });
  });
});

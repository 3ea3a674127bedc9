import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { EngineError, RegisterFunctionInput } from '@ironflow/contracts';
import { FUNCTION_OPTIONS } from '@ironflow/engine';
import { SCOPE, STORES, TestEngine, openTestEngine } from '@ironflow/testing';

/**
 * The list `ironflow dev --help` prints (FUNCTION_OPTIONS) tells the truth: each option it calls
 * acted on registers, and each it calls refused is refused with VALIDATION_ERROR naming it.
 */
describe.each(STORES)('function registration options [%s]', (dialect) => {
  let t: TestEngine;

  beforeAll(async () => {
    // A secrets key, so `secrets` can be acted on.
    t = await openTestEngine(dialect, {}, { security: { secretsKey: randomBytes(32) } });
  });
  afterAll(() => t.close());

  it.each(FUNCTION_OPTIONS.map((o) => [o.name, o] as const))('%s is what the list says', async (_name, option) => {
    const id = `opt-${option.name.replace(/[^A-Za-z]/g, '')}`;
    const register = () => t.engine.api.registerFunction(SCOPE, { id, mode: 'pull', triggers: [{ event: 'x' }], ...option.example });
    if (option.status === 'acted on') {
      const { function: fn } = await register();
      expect(fn.id).toBe(id);
      return;
    }
    const err = await register().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EngineError);
    expect((err as EngineError).code).toBe('VALIDATION_ERROR');
    expect((err as EngineError).message).toContain(option.name);
    expect((await t.engine.api.listFunctions(SCOPE)).map((f) => f.id)).not.toContain(id);
  });

  it('a key the engine does not know, at any depth, is refused with VALIDATION_ERROR naming each one; nothing is stored', async () => {
    const input = {
      id: 'opt-unknown',
      mode: 'pull',
      timeout: 5000,
      triggers: [{ event: 'x', filter: 'event.data.a > 1' }],
      retry: { maxAttemps: 2 },
      concurrency: { limit: 1, scope: 'fn' },
      debounce: { periodMs: 1000, period: 5 },
      cancelOn: [{ event: 'y', timeout: '1m' }],
    };
    const err = await t.engine.api.registerFunction(SCOPE, input as never).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EngineError);
    expect((err as EngineError).code).toBe('VALIDATION_ERROR');
    const named = /^unknown field\(s\), not options of this engine: (.*)$/.exec((err as EngineError).message)?.[1].split(', ');
    expect(named?.sort()).toEqual(['cancelOn.0.timeout', 'concurrency.scope', 'debounce.period', 'retry.maxAttemps', 'timeout', 'triggers.0.filter'].sort());
    expect((await t.engine.api.listFunctions(SCOPE)).map((f) => f.id)).not.toContain('opt-unknown');
  });

  it('concurrency.limit 0 is refused (it was read as no limit, its key ignored); nothing is stored', async () => {
    for (const concurrency of [{ limit: 0 }, { limit: 0, key: 'data.customerId' }]) {
      await expect(t.engine.api.registerFunction(SCOPE, { id: 'opt-conc0', mode: 'pull', concurrency })).rejects.toMatchObject({
        code: 'VALIDATION_ERROR', message: 'concurrency.limit: at least 1 (leave concurrency out for no limit)',
      });
    }
    expect((await t.engine.api.listFunctions(SCOPE)).map((f) => f.id)).not.toContain('opt-conc0');
  });

  it('retry.initialDelayMs above retry.maxDelayMs (the default cap 300000 when left out) is refused naming both; equal is accepted', async () => {
    const refused = [
      [{ initialDelayMs: 5000, maxDelayMs: 1000 }, 'retry.initialDelayMs: 5000 is above retry.maxDelayMs (1000): every delay would be the cap; give a maxDelayMs at least initialDelayMs'],
      [{ initialDelayMs: 400_000 }, 'retry.initialDelayMs: 400000 is above retry.maxDelayMs (300000, the default): every delay would be the cap; give a maxDelayMs at least initialDelayMs'],
      [{ maxDelayMs: 500 }, 'retry.initialDelayMs: 1000 (the default) is above retry.maxDelayMs (500): every delay would be the cap; give a maxDelayMs at least initialDelayMs'],
    ] as const;
    for (const [retry, message] of refused) {
      await expect(t.engine.api.registerFunction(SCOPE, { id: 'opt-retry-cap', mode: 'pull', retry: retry as RegisterFunctionInput['retry'] })).rejects.toMatchObject({ code: 'VALIDATION_ERROR', message });
    }
    expect((await t.engine.api.listFunctions(SCOPE)).map((f) => f.id)).not.toContain('opt-retry-cap');
    const { function: fn } = await t.engine.api.registerFunction(SCOPE, { id: 'opt-retry-flat', mode: 'pull', retry: { initialDelayMs: 2000, maxDelayMs: 2000 } as RegisterFunctionInput['retry'] });
    expect(fn.retry).toEqual({ maxAttempts: 3, initialDelayMs: 2000, backoffFactor: 2, maxDelayMs: 2000 });
  });

  it('an empty expression, cron, key or match (taken for none before) and a path with an empty name are refused naming the field; nothing is stored', async () => {
    const refused = [
      [{ triggers: [{ event: 'x', expression: '' }] }, 'triggers.0.expression: empty (leave expression out for no filter)'],
      [{ triggers: [{ event: 'x', cron: '' }] }, 'triggers.0.cron: empty (leave cron out for an event trigger)'],
      [{ concurrency: { limit: 1, key: '' } }, 'concurrency.key: an empty path (leave it out for none)'],
      [{ debounce: { periodMs: 1000, key: '' } }, 'debounce.key: an empty path (leave it out for none)'],
      [{ cancelOn: [{ event: 'y', match: '' }] }, 'cancelOn.0.match: an empty path (leave it out for none)'],
      [{ concurrency: { limit: 1, key: 'data..customerId' } }, 'concurrency.key: "data..customerId" has an empty name between dots'],
      [{ debounce: { periodMs: 1000, key: '.customerId' } }, 'debounce.key: ".customerId" has an empty name between dots'],
      [{ cancelOn: [{ event: 'y', match: 'data.' }] }, 'cancelOn.0.match: "data." has an empty name between dots'],
    ] as const;
    for (const [option, message] of refused) {
      await expect(t.engine.api.registerFunction(SCOPE, { id: 'opt-empty', mode: 'pull', triggers: [{ event: 'x' }], ...(option as Partial<RegisterFunctionInput>) })).rejects.toMatchObject({
        code: 'VALIDATION_ERROR', message: expect.stringContaining(message),
      });
    }
    expect((await t.engine.api.listFunctions(SCOPE)).map((f) => f.id)).not.toContain('opt-empty');
  });

  it('preferredMode is another name of mode (push, pull or the enum names); an unknown or contradicting value is refused', async () => {
    const push = { triggers: [{ event: 'x' }], endpointUrl: 'http://127.0.0.1:1/fn' };
    expect((await t.engine.api.registerFunction(SCOPE, { id: 'opt-alias-push', preferredMode: 'push', ...push } as never)).function.mode).toBe('push');
    expect((await t.engine.api.registerFunction(SCOPE, { id: 'opt-alias-pull', preferredMode: 'EXECUTION_MODE_PULL' } as never)).function.mode).toBe('pull');
    await expect(t.engine.api.registerFunction(SCOPE, { id: 'opt-alias-bad', preferredMode: 'sideways' } as never)).rejects.toMatchObject({ code: 'VALIDATION_ERROR', message: 'preferredMode: "push" or "pull", not "sideways"' });
    await expect(t.engine.api.registerFunction(SCOPE, { id: 'opt-alias-both', mode: 'pull', preferredMode: 'push', ...push } as never)).rejects.toMatchObject({ code: 'VALIDATION_ERROR' });
  });

  it('a mode left out is push when an endpointUrl is given (else pull); a pull function with an endpointUrl is refused, nothing stored', async () => {
    const endpointUrl = 'http://127.0.0.1:1/fn';
    const pushed = await t.engine.api.registerFunction(SCOPE, { id: 'opt-mode-inferred', triggers: [{ event: 'x' }], endpointUrl });
    expect([pushed.function.mode, pushed.function.endpointUrl]).toEqual(['push', endpointUrl]);
    expect((await t.engine.api.registerFunction(SCOPE, { id: 'opt-mode-none', triggers: [{ event: 'x' }] })).function.mode).toBe('pull');
    for (const input of [{ id: 'opt-mode-pull-url', mode: 'pull' as const, endpointUrl }, { id: 'opt-mode-pull-url', preferredMode: 'EXECUTION_MODE_PULL', endpointUrl }]) {
      await expect(t.engine.api.registerFunction(SCOPE, input as never)).rejects.toMatchObject({
        code: 'VALIDATION_ERROR',
        message: 'endpointUrl: a pull function has no endpoint (its workers poll the engine); register it with mode "push" to be called there, or leave endpointUrl out',
      });
    }
    expect((await t.engine.api.listFunctions(SCOPE)).map((f) => f.id)).not.toContain('opt-mode-pull-url');
  });
});

describe('README', () => {
  it('lists every function option in its "Function options" section, refused ones as refused', () => {
    const readme = readFileSync(resolve(__dirname, '../../../../README.md'), 'utf8');
    const section = readme.slice(readme.indexOf('## Function options'), readme.indexOf('\n## ', readme.indexOf('## Function options') + 1));
    for (const option of FUNCTION_OPTIONS) {
      const name = option.name.split(' / ')[0];
      const row = section.split('\n').find((l) => l.startsWith('| ') && l.split('|')[1].includes(`\`${name}\``));
      expect(row).toBeDefined();
      if (option.status === 'refused') expect(row).toContain('refused');
    }
  });
});

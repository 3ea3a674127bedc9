import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadSettings } from './settings';

describe('settings: IRONFLOW_SIGNING_KEY', () => {
  it('is unset by default and taken as given when valid', () => {
    expect(loadSettings({}).signingKey).toBeUndefined();
    expect(loadSettings({ IRONFLOW_SIGNING_KEY: '' }).signingKey).toBeUndefined();
    expect(loadSettings({ IRONFLOW_SIGNING_KEY: 'k'.repeat(16) }).signingKey).toBe('k'.repeat(16));
  });

  it.each([
    ['shorter than 16 characters', 'short-key', 'at least 16 characters'],
    ['ending in a newline (read from a file)', `${'k'.repeat(20)}\n`, 'whitespace'],
    ['starting with a space', ` ${'k'.repeat(20)}`, 'whitespace'],
  ])('stops the process when %s, naming the variable', (_case, value, reason) => {
    expect(() => loadSettings({ IRONFLOW_SIGNING_KEY: value })).toThrow(/IRONFLOW_SIGNING_KEY/);
    expect(() => loadSettings({ IRONFLOW_SIGNING_KEY: value })).toThrow(reason);
  });
});

describe('security settings', () => {
  it('defaults: open until a key exists, no admin key, no secrets key, push anywhere but link-local and metadata', () => {
    const s = loadSettings({});
    expect(s).toMatchObject({ requireApiKey: false, apiKeyCacheMs: 5000, pushAllowedHosts: [] });
    expect(s.secretsKey).toBeUndefined();
    expect(s.adminKey).toBeUndefined();
  });

  it('reads IRONFLOW_SECRETS_KEY (hex or base64), IRONFLOW_REQUIRE_API_KEY, IRONFLOW_ADMIN_KEY, IRONFLOW_API_KEY_CACHE_MS and IRONFLOW_PUSH_ALLOWED_HOSTS', () => {
    const key = randomBytes(32);
    const admin = randomBytes(24).toString('base64');
    const s = loadSettings({
      IRONFLOW_SECRETS_KEY: key.toString('base64'),
      IRONFLOW_REQUIRE_API_KEY: 'true',
      IRONFLOW_ADMIN_KEY: admin,
      IRONFLOW_API_KEY_CACHE_MS: '1000',
      IRONFLOW_PUSH_ALLOWED_HOSTS: '10.0.0.0/8, *.svc.cluster.local ,hooks.example.com',
    });
    expect(s.secretsKey).toEqual(key);
    expect(s).toMatchObject({ requireApiKey: true, adminKey: admin, apiKeyCacheMs: 1000, pushAllowedHosts: ['10.0.0.0/8', '*.svc.cluster.local', 'hooks.example.com'] });
    expect(loadSettings({ IRONFLOW_SECRETS_KEY: key.toString('hex') }).secretsKey).toEqual(key);
  });

  it('refuses bad values at start, naming the variable and never echoing a key', () => {
    const shortKey = randomBytes(16).toString('hex');
    const attempt = (env: Record<string, string>) => {
      try {
        loadSettings(env);
        return '';
      } catch (err) {
        return (err as Error).message;
      }
    };
    const bad = attempt({ IRONFLOW_SECRETS_KEY: shortKey });
    expect(bad).toContain('IRONFLOW_SECRETS_KEY');
    expect(bad).not.toContain(shortKey);
    expect(attempt({ IRONFLOW_ADMIN_KEY: 'short' })).toContain('IRONFLOW_ADMIN_KEY: at least 32 characters');
    expect(attempt({ IRONFLOW_REQUIRE_API_KEY: 'yes' })).toContain('IRONFLOW_REQUIRE_API_KEY');
    expect(attempt({ IRONFLOW_PUSH_ALLOWED_HOSTS: '10.0.0.0/99' })).toContain('IRONFLOW_PUSH_ALLOWED_HOSTS: "10.0.0.0/99" is not a CIDR');
  });
});

describe('loadSettings: IRONFLOW_CLUSTER_ID', () => {
  it('defaults to the ironflow deployment', () => {
    expect(loadSettings({}).clusterId).toBe('ironflow');
  });

  it('takes a release-name-like id', () => {
    expect(loadSettings({ IRONFLOW_CLUSTER_ID: 'prod-eu_1' }).clusterId).toBe('prod-eu_1');
  });

  it('refuses at start an id that cannot stand in a NATS subject or stream name, naming the variable', () => {
    for (const bad of ['a.b', 'a*', '>', 'has space', 'x'.repeat(64)]) {
      expect(() => loadSettings({ IRONFLOW_CLUSTER_ID: bad })).toThrow(/IRONFLOW_CLUSTER_ID/);
    }
  });
});

describe('loadSettings: the forwarded TriggerSync timers', () => {
  it('default to the engine defaults: the gateway waits 2000 ms for a dispatcher, a dispatcher holds a trigger 1000 ms for a slot', () => {
    expect(loadSettings({})).toMatchObject({ triggerForwardTimeoutMs: 2000, forwardedTriggerWaitMs: 1000 });
  });

  it('reads IRONFLOW_TRIGGER_FORWARD_TIMEOUT_MS and IRONFLOW_FORWARDED_TRIGGER_WAIT_MS (0: answer busy at once)', () => {
    expect(loadSettings({ IRONFLOW_TRIGGER_FORWARD_TIMEOUT_MS: '5000', IRONFLOW_FORWARDED_TRIGGER_WAIT_MS: '0' })).toMatchObject({ triggerForwardTimeoutMs: 5000, forwardedTriggerWaitMs: 0 });
  });

  it('IRONFLOW_GATEWAY_PUSH: the gateway calls its sync triggers\' push runs itself by default; false hands them all to a dispatcher; anything else stops the start', () => {
    expect(loadSettings({}).gatewayPush).toBe(true);
    expect([loadSettings({ IRONFLOW_GATEWAY_PUSH: 'false' }).gatewayPush, loadSettings({ IRONFLOW_GATEWAY_PUSH: '0' }).gatewayPush, loadSettings({ IRONFLOW_GATEWAY_PUSH: 'true' }).gatewayPush]).toEqual([false, false, true]);
    expect(() => loadSettings({ IRONFLOW_GATEWAY_PUSH: 'off' })).toThrow(/IRONFLOW_GATEWAY_PUSH/);
  });

  it('IRONFLOW_GATEWAY_PUSH_SLOTS: 128 by default, a whole number from 1', () => {
    expect([loadSettings({}).gatewayPushSlots, loadSettings({ IRONFLOW_GATEWAY_PUSH_SLOTS: '32' }).gatewayPushSlots]).toEqual([128, 32]);
    for (const bad of ['0', '-1', '1.5', 'many']) expect(() => loadSettings({ IRONFLOW_GATEWAY_PUSH_SLOTS: bad })).toThrow(/IRONFLOW_GATEWAY_PUSH_SLOTS/);
  });

  it('refuses at start a slot wait not below the gateway timeout, and values that are not whole ms, naming the variable', () => {
    expect(() => loadSettings({ IRONFLOW_FORWARDED_TRIGGER_WAIT_MS: '2000' })).toThrow(/IRONFLOW_FORWARDED_TRIGGER_WAIT_MS: must be below IRONFLOW_TRIGGER_FORWARD_TIMEOUT_MS/);
    expect(() => loadSettings({ IRONFLOW_TRIGGER_FORWARD_TIMEOUT_MS: '500' })).toThrow(/IRONFLOW_FORWARDED_TRIGGER_WAIT_MS/);
    expect(() => loadSettings({ IRONFLOW_TRIGGER_FORWARD_TIMEOUT_MS: '0' })).toThrow(/IRONFLOW_TRIGGER_FORWARD_TIMEOUT_MS/);
    expect(() => loadSettings({ IRONFLOW_FORWARDED_TRIGGER_WAIT_MS: '-1' })).toThrow(/IRONFLOW_FORWARDED_TRIGGER_WAIT_MS/);
    expect(() => loadSettings({ IRONFLOW_TRIGGER_FORWARD_TIMEOUT_MS: '2s' })).toThrow(/IRONFLOW_TRIGGER_FORWARD_TIMEOUT_MS/);
  });
});

describe('settings: README "Running on PostgreSQL and NATS"', () => {
  const repoRoot = join(__dirname, '..', '..', '..', '..');
  /** The table's rows: the variables of the first cell, the cell of defaults. */
  const rows = (): { names: string[]; defaults: string }[] => {
    const readme = readFileSync(join(repoRoot, 'README.md'), 'utf8');
    const section = readme.slice(readme.indexOf('## Running on PostgreSQL and NATS'));
    const table = section.slice(section.indexOf('| variable | default |'), section.indexOf('\n\n', section.indexOf('| variable | default |')));
    return table.split('\n').slice(2).map((line) => {
      const [, first, defaults] = line.split('|');
      return { names: [...first.matchAll(/`((?:IRONFLOW_)?[A-Z][A-Z0-9_]+)`/g)].map((m) => m[1]), defaults: defaults.trim() };
    });
  };
  /** Every variable the settings schema reads (its keys in settings.ts). */
  const read = [...readFileSync(join(__dirname, 'settings.ts'), 'utf8').matchAll(/^ {2}(IRONFLOW_[A-Z0-9_]+): z\b/gm)].map((m) => m[1]);

  it('documents every variable the services read, and only those (NATS_URL standing for IRONFLOW_NATS_URL)', () => {
    expect(read).toContain('IRONFLOW_TRIGGER_FORWARD_TIMEOUT_MS');
    const documented = rows().flatMap((r) => r.names).filter((n) => n !== 'NATS_URL');
    expect([...documented].sort()).toEqual([...read].sort());
  });

  it('gives each variable the default the code applies', () => {
    const settings = loadSettings({}) as unknown as Record<string, unknown>;
    let compared = 0;
    for (const { names, defaults } of rows()) {
      // A leading run of code values, one per variable of the row (`90000`, `1000` or `9123` / `0.0.0.0`); prose (none, the host name) is not compared.
      const values = /^`[^`]+`(?:\s*[,/]\s*`[^`]+`)*/.exec(defaults)?.[0].match(/`[^`]+`/g)?.map((v) => v.slice(1, -1));
      if (!values || values.length !== names.length) continue;
      names.forEach((name, i) => {
        const field = name.replace(/^IRONFLOW_/, '').toLowerCase().replace(/_([a-z])/g, (_m, c: string) => c.toUpperCase());
        expect([name, String(settings[field])]).toEqual([name, values[i]]);
        compared++;
      });
    }
    expect(compared).toBeGreaterThanOrEqual(18);
  });
});

describe('loadSettings: an IRONFLOW_* variable the services do not read', () => {
  const attempt = (env: Record<string, string>): string => {
    try {
      loadSettings(env);
      return '';
    } catch (err) {
      expect((err as { code?: string }).code).toBe('SETTINGS_ERROR');
      return (err as Error).message;
    }
  };

  it('stops the process, naming the variable, the setting it is a typo of and where the settings are listed', () => {
    expect(attempt({ IRONFLOW_LEASE_MSS: '90000' })).toBe(
      'invalid configuration: IRONFLOW_LEASE_MSS: not a setting (did you mean IRONFLOW_LEASE_MS?) (the settings are listed in README.md "Running on PostgreSQL and NATS")',
    );
    expect(attempt({ IRONFLOW_LAESE_MS: '1000' })).toContain('IRONFLOW_LAESE_MS: not a setting (did you mean IRONFLOW_LEASE_MS?)');
    expect(attempt({ IRONFLOW_DATABASE: 'postgres://x' })).toContain('IRONFLOW_DATABASE: not a setting (did you mean IRONFLOW_DATABASE_URL?)');
  });

  it('names no setting when none is close, and lists unknown and bad variables together', () => {
    expect(attempt({ IRONFLOW_COLOUR_SCHEME: 'dark' })).toBe(
      'invalid configuration: IRONFLOW_COLOUR_SCHEME: not a setting (the settings are listed in README.md "Running on PostgreSQL and NATS")',
    );
    expect(attempt({ IRONFLOW_TIK_MS: '10', IRONFLOW_PORT: 'x' })).toMatch(/^invalid configuration: IRONFLOW_TIK_MS: not a setting \(did you mean IRONFLOW_TICK_MS\?\); IRONFLOW_PORT: Expected number/);
  });

  it('ignores an empty one, names without the prefix, the client variables and the test and bench harnesses\' variables', () => {
    const s = loadSettings({
      IRONFLOW_LEASE_MSS: '',
      LEASE_MS: '5',
      IRONFLOW_SERVER_URL: 'http://localhost:9123',
      IRONFLOW_API_KEY: 'ifk_x',
      IRONFLOW_ENV: 'prod',
      IRONFLOW_TEST_DATABASE_URL: 'postgres://t',
      IRONFLOW_TEST_CHROMIUM: '/usr/bin/chromium',
      IRONFLOW_BENCH_PG_STATEMENTS: '1',
      IRONFLOW_NODE_ARGS_DISPATCHER: '--cpu-prof',
      IRONFLOW_TRACE_DIR: '/tmp/trace',
      IRONFLOW_LEASE_MS: '5000',
    });
    expect(s.leaseMs).toBe(5000);
  });

  it('accepts every IRONFLOW_* name the chart\'s deployments and docker-compose mention', () => {
    const repoRoot = join(__dirname, '..', '..', '..', '..');
    const compose = readFileSync(join(repoRoot, 'deploy', 'docker-compose.yml'), 'utf8');
    const chart = readFileSync(join(repoRoot, 'helm', 'ironflow', 'templates', 'deployments.yaml'), 'utf8');
    const names = new Set([...`${compose}\n${chart}`.matchAll(/\bIRONFLOW_[A-Z0-9_]+/g)].map((m) => m[0]));
    expect([...names]).toEqual(expect.arrayContaining(['IRONFLOW_DATABASE_URL', 'IRONFLOW_CLUSTER_ID', 'IRONFLOW_NODE_ID', 'IRONFLOW_SERVER_URL']));
    // Any value: a bad one is refused for its value, which is not what this looks for.
    const issues = [...names].filter((name) => attempt({ [name]: 'x' }).includes(`${name}: not a setting`));
    expect(issues).toEqual([]);
  });
});

import { createServer, Server } from 'node:http';
import { AddressInfo } from 'node:net';
import { fetch } from 'undici';
import { LookupAll, PushEndpointPolicy, PushEndpointRefused, parseAllowedHosts } from './push-endpoint-policy';

/** A resolver answering from a table (names not in it do not resolve). */
function fakeDns(table: Record<string, string[]>): LookupAll {
  return async (host) => {
    const addresses = table[host];
    if (!addresses) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
    return addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
}

async function refusal(policy: PushEndpointPolicy, url: string): Promise<string | undefined> {
  try {
    await policy.checkRegistration(url);
    return undefined;
  } catch (err) {
    expect(err).toMatchObject({ code: 'VALIDATION_ERROR' });
    return (err as Error).message;
  }
}

describe('push endpoint allow-list', () => {
  const policies: PushEndpointPolicy[] = [];
  const policy = (options: ConstructorParameters<typeof PushEndpointPolicy>[0]) => {
    const p = new PushEndpointPolicy(options);
    policies.push(p);
    return p;
  };
  afterAll(async () => {
    for (const p of policies) await p.close();
  });

  it('by default refuses link-local and metadata addresses and names, and allows loopback, private and public ones', async () => {
    const p = policy({ lookup: fakeDns({ 'evil.example': ['10.0.0.5', '169.254.169.254'], 'app.internal': ['10.1.2.3'], 'api.example.com': ['93.184.216.34'] }) });
    for (const url of [
      'http://169.254.169.254/latest/meta-data/',
      'http://169.254.10.1:8080/',
      'http://[fe80::1]/',
      'http://[fd00:ec2::254]/',
      'http://[::ffff:169.254.169.254]/',
      'http://100.100.100.200/',
      'http://metadata.google.internal/computeMetadata/v1/',
      'http://METADATA.google.internal./',
      'http://evil.example/hook',
    ]) {
      expect(await refusal(p, url)).toMatch(/link-local|metadata/);
    }
    expect(await refusal(p, 'http://evil.example/hook')).toContain('evil.example resolves to 169.254.169.254');
    for (const url of ['http://127.0.0.1:3400/api/ironflow', 'http://localhost:3400/', 'http://[::1]:80/', 'http://10.1.2.3/', 'http://app.internal/', 'https://api.example.com/fn', 'http://not-yet-in-dns.example/']) {
      expect(await refusal(p, url)).toBeUndefined();
    }
  });

  it('with IRONFLOW_PUSH_ALLOWED_HOSTS allows only what it names: CIDRs, addresses, names and *.domain wildcards; metadata stays refused', async () => {
    const p = policy({
      allowedHosts: ['10.0.0.0/8', '192.168.1.7', 'hooks.example.com', '*.svc.cluster.local', '169.254.0.0/16'],
      lookup: fakeDns({ 'hooks.example.com': ['93.184.216.34'], 'orders.svc.cluster.local': ['172.20.0.4'], 'other.example.com': ['93.184.216.35'], 'inside.example': ['10.9.9.9'] }),
    });
    for (const url of ['http://10.20.30.40/', 'http://192.168.1.7:9000/', 'https://hooks.example.com/x', 'http://orders.svc.cluster.local/', 'http://inside.example/']) {
      expect(await refusal(p, url)).toBeUndefined();
    }
    expect(await refusal(p, 'http://192.168.1.8/')).toContain('192.168.1.8, which IRONFLOW_PUSH_ALLOWED_HOSTS does not allow');
    expect(await refusal(p, 'http://127.0.0.1:3400/')).toContain('IRONFLOW_PUSH_ALLOWED_HOSTS does not allow');
    expect(await refusal(p, 'http://other.example.com/')).toContain('other.example.com resolves to 93.184.216.35');
    expect(await refusal(p, 'http://169.254.169.254/')).toContain('link-local');
  });

  it('refuses a bad allow-list entry by name', () => {
    expect(() => parseAllowedHosts(['10.0.0.0/33'])).toThrow('"10.0.0.0/33" is not a CIDR');
    expect(() => parseAllowedHosts(['bad_host!'])).toThrow('"bad_host!" is not a CIDR, an address or a host name');
    expect(parseAllowedHosts([' *.Example.COM ', '', '::1']).suffixes).toEqual(['.example.com']);
  });

  describe('at dispatch, every connection is checked before a byte is sent', () => {
    let server: Server;
    let port: number;
    let requests = 0;
    beforeAll(async () => {
      server = createServer((_req, res) => {
        requests++;
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      port = (server.address() as AddressInfo).port;
    });
    afterAll(() => new Promise((resolve) => server.close(resolve)));

    async function call(p: PushEndpointPolicy, url: string): Promise<unknown> {
      try {
        const res = await fetch(url, { method: 'POST', body: '{}', dispatcher: p.dispatcher, redirect: 'manual' });
        return res.status;
      } catch (err) {
        return (err as { cause?: unknown }).cause;
      }
    }

    it('a name that now resolves to a metadata address is refused (DNS changed since registration); an allowed one connects', async () => {
      const dns: Record<string, string[]> = { 'push.example': ['127.0.0.1'] };
      const p = policy({ lookup: async (host) => fakeDns(dns)(host) });
      expect(await call(p, `http://push.example:${port}/`)).toBe(200);
      expect(requests).toBe(1);
      dns['push.example'] = ['169.254.169.254'];
      // A new connection is needed for the new address: the pool keeps the old one otherwise.
      const fresh = policy({ lookup: async (host) => fakeDns(dns)(host) });
      const refused = await call(fresh, `http://push.example:${port}/`);
      expect(refused).toBeInstanceOf(PushEndpointRefused);
      expect((refused as Error).message).toContain('push.example resolves to 169.254.169.254');
      expect(requests).toBe(1);
    });

    it('an address literal outside the allow-list is refused without connecting', async () => {
      const p = policy({ allowedHosts: ['10.0.0.0/8'] });
      const refused = await call(p, `http://127.0.0.1:${port}/`);
      expect(refused).toBeInstanceOf(PushEndpointRefused);
      expect((refused as Error).message).toContain('127.0.0.1, which IRONFLOW_PUSH_ALLOWED_HOSTS does not allow');
      expect(requests).toBe(1);
    });
  });
});

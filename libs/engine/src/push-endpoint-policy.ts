import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';
import { Agent, buildConnector } from 'undici';
import { EngineError } from '@ironflow/contracts';

/** Resolves a host name to every address it has (the shape of `dns.lookup(host, { all: true })`). */
export type LookupAll = (hostname: string) => Promise<LookupAddress[]>;

const systemLookup: LookupAll = (hostname) =>
  new Promise((resolve, reject) => dnsLookup(hostname, { all: true }, (err, addresses) => (err ? reject(err) : resolve(addresses))));

/** Cloud metadata host names, refused whatever the allow-list says. */
const METADATA_NAMES = new Set(['metadata.google.internal', 'metadata.goog', 'metadata', 'instance-data', 'instance-data.ec2.internal']);

/** Addresses refused whatever the allow-list says: link-local (every cloud's metadata service sits there) and metadata addresses elsewhere. */
const REFUSED_RANGES: { range: [ipaddr.IPv4 | ipaddr.IPv6, number]; what: string }[] = [
  { range: ipaddr.parseCIDR('169.254.0.0/16'), what: 'a link-local address (cloud metadata services live there)' },
  { range: ipaddr.parseCIDR('fe80::/10'), what: 'a link-local address' },
  { range: ipaddr.parseCIDR('fd00:ec2::254/128'), what: 'the AWS metadata address' },
  { range: ipaddr.parseCIDR('100.100.100.200/32'), what: 'the Alibaba Cloud metadata address' },
];

/** How long registration waits for DNS before accepting a name it could not resolve (dispatch checks every connection anyway). */
const REGISTRATION_LOOKUP_MS = 2000;

/** The error a refused push connection fails with; the push dispatcher turns it into `PUSH_ENDPOINT_REFUSED`. */
export class PushEndpointRefused extends Error {
  readonly code = 'PUSH_ENDPOINT_REFUSED';
  constructor(message: string) {
    super(message);
    this.name = 'PushEndpointRefused';
  }
}

/** The parsed `IRONFLOW_PUSH_ALLOWED_HOSTS`. */
interface AllowList {
  ranges: [ipaddr.IPv4 | ipaddr.IPv6, number][];
  names: Set<string>;
  /** `*.example.com` entries, stored as `.example.com`. */
  suffixes: string[];
}

/**
 * Parses allow-list entries: a CIDR (`10.0.0.0/8`, `fd12::/16`), an address (`10.1.2.3`), a host
 * name (`api.example.com`) or a wildcard (`*.example.com`: any subdomain). Throws an Error naming
 * the first entry that is none of these.
 */
export function parseAllowedHosts(entries: readonly string[]): AllowList {
  const list: AllowList = { ranges: [], names: new Set(), suffixes: [] };
  for (const raw of entries) {
    const entry = normalizeHost(raw);
    if (entry === '') continue;
    if (entry.includes('/')) {
      if (!ipaddr.isValidCIDR(entry)) throw new Error(`IRONFLOW_PUSH_ALLOWED_HOSTS: ${JSON.stringify(raw)} is not a CIDR`);
      list.ranges.push(ipaddr.parseCIDR(entry));
    } else if (isIP(entry)) {
      const address = ipaddr.process(entry);
      list.ranges.push([address, address.kind() === 'ipv4' ? 32 : 128]);
    } else if (/^(\*\.)?[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/.test(entry)) {
      if (entry.startsWith('*.')) list.suffixes.push(entry.slice(1));
      else list.names.add(entry);
    } else {
      throw new Error(`IRONFLOW_PUSH_ALLOWED_HOSTS: ${JSON.stringify(raw)} is not a CIDR, an address or a host name`);
    }
  }
  return list;
}

/** Lowercase, without IPv6 brackets or a trailing dot. */
function normalizeHost(host: string): string {
  return host.trim().toLowerCase().replace(/^\[(.*)\]$/, '$1').replace(/\.$/, '');
}

/**
 * Where push dispatch may connect (issue 9, item 7): refuses link-local addresses (169.254.0.0/16,
 * fe80::/10) and cloud metadata addresses and names (169.254.169.254, fd00:ec2::254,
 * 100.100.100.200, `metadata.google.internal`…) always; with an allow-list
 * (`IRONFLOW_PUSH_ALLOWED_HOSTS`), anything it does not name. Without one, loopback and private
 * addresses stay allowed (`ironflow dev` and the example push to localhost).
 *
 * Checked twice: at registration ({@link checkRegistration}: the URL's host and what it resolves
 * to now) and on every connection the dispatcher opens ({@link dispatcher}: the addresses DNS
 * gives at that moment, before a byte is sent), since DNS can change after registration.
 */
export class PushEndpointPolicy {
  private readonly allow: AllowList | undefined;
  private readonly lookup: LookupAll;
  /** The undici dispatcher push calls go through: every connection's host and addresses are checked first. */
  readonly dispatcher: Agent;

  /**
   * `allowedHosts`: allow-list entries (see {@link parseAllowedHosts}); empty = every address not
   * refused. `lookup`: DNS resolution (default the system resolver; tests inject one).
   * Throws an Error for a bad entry.
   */
  constructor(options: { allowedHosts?: readonly string[]; lookup?: LookupAll } = {}) {
    const entries = options.allowedHosts ?? [];
    this.allow = entries.length > 0 ? parseAllowedHosts(entries) : undefined;
    this.lookup = options.lookup ?? systemLookup;
    const connect = buildConnector({ lookup: this.checkedLookup } as buildConnector.BuildOptions);
    this.dispatcher = new Agent({
      // The function's timeout bounds a push call (an AbortSignal), not undici's own 300 s defaults.
      headersTimeout: 0,
      bodyTimeout: 0,
      connect: (opts, callback) => {
        // Address literals never reach `lookup`: check them here.
        const refusal = this.refusalOf(opts.hostname);
        if (refusal) return callback(new PushEndpointRefused(refusal), null);
        return connect(opts, callback);
      },
    });
  }

  /**
   * Registration: throws `VALIDATION_ERROR` naming why when the URL's host is refused or resolves
   * to a refused address now. A name that does not resolve (yet) is accepted: dispatch checks it.
   */
  async checkRegistration(endpointUrl: string): Promise<void> {
    const host = normalizeHost(new URL(endpointUrl).hostname);
    const refuse = (why: string) => {
      throw new EngineError('VALIDATION_ERROR', `endpointUrl: ${why}; push endpoints are limited by IRONFLOW_PUSH_ALLOWED_HOSTS and never reach link-local or metadata addresses`);
    };
    const refusal = this.refusalOf(host);
    if (refusal) refuse(refusal);
    if (isIP(host)) return;
    let timer: NodeJS.Timeout | undefined;
    const addresses = await Promise.race([
      this.lookup(host).catch(() => []),
      new Promise<LookupAddress[]>((resolve) => { timer = setTimeout(() => resolve([]), REGISTRATION_LOOKUP_MS); }),
    ]).finally(() => clearTimeout(timer));
    for (const a of addresses) {
      const why = this.addressRefusal(a.address, this.allowedByName(host));
      if (why) refuse(`${host} resolves to ${why}`);
    }
  }

  private closing?: Promise<void>;

  /** Closes the dispatcher's pooled connections (idempotent). */
  close(): Promise<void> {
    this.closing ??= this.dispatcher.close();
    return this.closing;
  }

  /** Why a host (a name or an address literal) is refused before any DNS, or undefined. */
  private refusalOf(rawHost: string): string | undefined {
    const host = normalizeHost(rawHost);
    if (isIP(host)) return this.addressRefusal(host, false);
    if (METADATA_NAMES.has(host)) return `${host} is a cloud metadata host`;
    return undefined;
  }

  private allowedByName(host: string): boolean {
    if (!this.allow) return true;
    return this.allow.names.has(host) || this.allow.suffixes.some((s) => host.endsWith(s));
  }

  /** Why an address is refused (`byName`: the host name is on the allow-list), or undefined. */
  private addressRefusal(address: string, byName: boolean): string | undefined {
    const ip = ipaddr.process(normalizeHost(address));
    for (const { range, what } of REFUSED_RANGES) {
      if (ip.kind() === range[0].kind() && ip.match(range)) return `${ip.toString()}, ${what}`;
    }
    if (this.allow && !byName && !this.allow.ranges.some((r) => ip.kind() === r[0].kind() && ip.match(r))) {
      return `${ip.toString()}, which IRONFLOW_PUSH_ALLOWED_HOSTS does not allow`;
    }
    return undefined;
  }

  /** `net.connect`'s `lookup`: resolves, and refuses the host when any address it has is refused. */
  private readonly checkedLookup = (
    hostname: string,
    options: LookupOptions,
    callback: (err: Error | null, address: string | LookupAddress[], family?: number) => void,
  ): void => {
    const host = normalizeHost(hostname);
    const refusal = this.refusalOf(host);
    if (refusal) return callback(new PushEndpointRefused(refusal), '');
    const byName = this.allowedByName(host);
    this.lookup(host).then(
      (all) => {
        const family = options.family === 4 || options.family === 6 ? options.family : 0;
        const addresses = family ? all.filter((a) => a.family === family) : all;
        for (const a of addresses) {
          const why = this.addressRefusal(a.address, byName);
          if (why) return callback(new PushEndpointRefused(`${host} resolves to ${why}`), '');
        }
        if (addresses.length === 0) return callback(Object.assign(new Error(`${host} has no address`), { code: 'ENOTFOUND' }), '');
        if (options.all) callback(null, addresses);
        else callback(null, addresses[0].address, addresses[0].family);
      },
      (err: Error) => callback(err, ''),
    );
  };
}

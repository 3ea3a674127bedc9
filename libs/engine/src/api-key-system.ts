import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { ApiKeyView, CallScope, EngineError, isScopeName, parseEnvironment } from '@ironflow/contracts';
import { ApiKeyRecord, Store, apiKeysSql } from '@ironflow/store';

/** Every key starts with this; then the key's 16-hex-digit id, `_`, and 43 base64url characters (256 random bits). */
export const API_KEY_PREFIX = 'ifk_';
const KEY_SHAPE = /^ifk_([0-9a-f]{16})_([A-Za-z0-9_-]{43})$/;
/** Most key lookups kept in memory per process (least recently used ones go first). */
const CACHE_ENTRIES = 10_000;

/** Whether this deployment requires keys, and why. */
export interface AuthMode {
  required: boolean;
  /** `setting`: IRONFLOW_REQUIRE_API_KEY; `keys`: a key was created; `open`: neither. */
  reason: 'setting' | 'keys' | 'open';
}

export interface ApiKeySystemOptions {
  /** `IRONFLOW_REQUIRE_API_KEY`: keys are required even before the first one exists. */
  requireApiKey?: boolean;
  /** `IRONFLOW_ADMIN_KEY`: the bearer that manages keys once keys are required. */
  adminKey?: string;
  /** How long a key lookup (and "no key exists yet") is trusted before the store is read again, ms. Default 5000. */
  cacheMs?: number;
}

function sha256(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}

/**
 * The key of an `Authorization: Bearer <key>` header (scheme in any case); undefined when the
 * header is absent or blank. Any other value (`Basic …`, a key without `Bearer`, `Bearer` without
 * a key or with two words) throws `UNAUTHENTICATED` saying `Bearer <key>` is expected, whether or
 * not keys are required: a credential sent is never ignored. The message names the scheme (a
 * short token) but never echoes the credential.
 */
function bearerOf(authorization: string | null | undefined): string | undefined {
  if (authorization === undefined || authorization === null || authorization.trim() === '') return undefined;
  const match = /^\s*Bearer\s+(\S+)\s*$/i.exec(authorization);
  if (match) return match[1];
  const scheme = /^\s*([A-Za-z][A-Za-z0-9-]{0,19})\s+\S/.exec(authorization)?.[1];
  const got = scheme === undefined ? 'a value without a scheme' : scheme.toLowerCase() === 'bearer' ? 'Bearer with more than one word' : `the ${scheme} scheme`;
  throw new EngineError('UNAUTHENTICATED', `Authorization: "Bearer <key>" is expected, not ${got}`);
}

function view(r: ApiKeyRecord): ApiKeyView {
  return {
    id: r.id,
    prefix: `${API_KEY_PREFIX}${r.id}`,
    project: r.project,
    env: r.env,
    name: r.name,
    createdAt: new Date(r.createdAt).toISOString(),
    ...(r.revokedAt !== null ? { revokedAt: new Date(r.revokedAt).toISOString() } : {}),
  };
}

/**
 * API keys (issue 9, item 7; DESIGN.md "Project comes from the API key"). A key belongs to one
 * project and one env; it is shown once at creation and stored as its SHA-256 only. A presented
 * key is found by its id and its hash compared in constant time.
 *
 * Keys are required once any key was ever created (the rows are shared by every service through
 * the store; revoking every key does not reopen the server) or when `requireApiKey` is set.
 * Until then the server is open: a call without a key is project `default`, env from its header;
 * a key sent is checked all the same (an unknown one is 401).
 *
 * Each process caches lookups for `cacheMs` (default 5 s): a revocation reaches the other
 * processes within that time (at once in the process that revoked).
 */
export class ApiKeySystem {
  private readonly cacheMs: number;
  private readonly adminKeyHash: Buffer | undefined;
  private readonly cache = new Map<string, { record: ApiKeyRecord | null; at: number }>();
  private keysExist: { value: boolean; at: number } | undefined;
  /** The store read of whether any key exists, while one is in flight. */
  private keysExistRead?: Promise<boolean>;

  constructor(
    private readonly store: Store,
    private readonly options: ApiKeySystemOptions = {},
  ) {
    this.cacheMs = options.cacheMs ?? 5000;
    this.adminKeyHash = options.adminKey ? sha256(options.adminKey) : undefined;
  }

  /**
   * Creates a key for (`project`, `env`) (both default `default`). Resolves to the key, which is
   * never shown again, and its listing. Throws `VALIDATION_ERROR` for a project or env that is
   * not letters, digits, `_`, `-` (at most 64) or a name over 200 characters.
   */
  async create(input: { project?: string; env?: string; name?: string } = {}): Promise<{ key: string; apiKey: ApiKeyView }> {
    const project = input.project?.trim() || 'default';
    const env = input.env?.trim() || 'default';
    const name = input.name?.trim() ?? '';
    if (!isScopeName(project)) throw new EngineError('VALIDATION_ERROR', 'project: letters, digits, "_" and "-" only, at most 64');
    if (!isScopeName(env)) throw new EngineError('VALIDATION_ERROR', 'env: letters, digits, "_" and "-" only, at most 64');
    if (name.length > 200) throw new EngineError('VALIDATION_ERROR', 'name: at most 200 characters');
    const id = randomBytes(8).toString('hex');
    const key = `${API_KEY_PREFIX}${id}_${randomBytes(32).toString('base64url')}`;
    const record = await this.store.unitOfWork('createApiKey', (tx) => apiKeysSql.insertApiKey(tx, { id, project, env, name, keyHash: sha256(key).toString('hex') }));
    this.keysExist = { value: true, at: Date.now() };
    return { key, apiKey: view(record) };
  }

  /** Every key, revoked ones included, oldest first. */
  async list(): Promise<ApiKeyView[]> {
    return (await this.store.read('listApiKeys', (tx) => apiKeysSql.listApiKeys(tx))).map(view);
  }

  /** Revokes a key (again: no change). Throws `API_KEY_NOT_FOUND` (404). Other processes see it within `cacheMs`. */
  async revoke(id: string): Promise<ApiKeyView> {
    const bare = id.startsWith(API_KEY_PREFIX) ? id.slice(API_KEY_PREFIX.length) : id;
    const record = await this.store.unitOfWork('revokeApiKey', (tx) => apiKeysSql.revokeApiKey(tx, bare));
    if (!record) throw new EngineError('API_KEY_NOT_FOUND', `API key ${id} does not exist`);
    this.cache.delete(bare);
    return view(record);
  }

  /** Whether keys are required now, and why (read from the store at most every `cacheMs` while none exists). */
  async mode(): Promise<AuthMode> {
    if (this.options.requireApiKey) return { required: true, reason: 'setting' };
    const now = Date.now();
    if (!this.keysExist?.value && (!this.keysExist || now - this.keysExist.at >= this.cacheMs)) {
      // Calls that come while the read is in flight share it (64 calls at once made 64 reads).
      this.keysExistRead ??= this.store.read('anyApiKey', (tx) => apiKeysSql.anyApiKey(tx)).finally(() => { this.keysExistRead = undefined; });
      this.keysExist = { value: await this.keysExistRead, at: now };
    }
    return this.keysExist!.value ? { required: true, reason: 'keys' } : { required: false, reason: 'open' };
  }

  /**
   * The scope of a client or worker call from its `Authorization` and `X-Ironflow-Environment`
   * headers. A call with a `Bearer` key: the key's project and env, with `apiKeyId`, whether or
   * not keys are required yet (a key sent is never ignored: on an open server an unknown one is
   * refused rather than taken as project `default`). A call without one: on an open server,
   * project `default` and the header's env; else refused. Throws `UNAUTHENTICATED` (401) for a
   * missing (keys required), unknown or revoked key and for an `Authorization` header that is not
   * `Bearer <key>` (open server or not), `PERMISSION_DENIED` (403) when the
   * header names another env than the key's, `VALIDATION_ERROR` for an env name that cannot be one.
   */
  async authenticate(headers: { authorization?: string | null; environment?: string | null }): Promise<CallScope> {
    const requestedEnv = headers.environment?.trim() ? parseEnvironment(headers.environment) : undefined;
    const presented = bearerOf(headers.authorization);
    if (!presented) {
      if (!(await this.mode()).required) return { project: 'default', env: requestedEnv ?? 'default' };
      throw new EngineError('UNAUTHENTICATED', 'an API key is required: send Authorization: Bearer <key>');
    }
    const record = await this.verify(presented);
    if (!record) {
      const open = !(await this.mode()).required;
      throw new EngineError('UNAUTHENTICATED', open ? 'the API key is not valid: this server has no such key (it is open: send no key, or make one with `ironflow apikey create`)' : 'the API key is not valid');
    }
    if (record.revokedAt !== null) throw new EngineError('UNAUTHENTICATED', `API key ${API_KEY_PREFIX}${record.id} was revoked`);
    if (requestedEnv !== undefined && requestedEnv !== record.env) {
      throw new EngineError('PERMISSION_DENIED', `API key ${API_KEY_PREFIX}${record.id} is for env ${JSON.stringify(record.env)}, not ${JSON.stringify(requestedEnv)}`);
    }
    return { project: record.project, env: record.env, apiKeyId: record.id };
  }

  /**
   * Who an admin call that `authenticateAdmin` let through acts as (audit rows, `ironflow instance
   * status`): `admin` when an admin key is configured, else `anonymous` (an open server).
   */
  get adminActor(): string {
    return this.adminKeyHash ? 'admin' : 'anonymous';
  }

  /**
   * Admits a call to the key-management routes. With an admin key configured
   * (`IRONFLOW_ADMIN_KEY`), only it, always; without one, any caller while the server is open (so
   * the first key can be made, e.g. in `ironflow dev`) and nobody once keys are required. Throws
   * `UNAUTHENTICATED` (401) without the admin key or for an `Authorization` header that is not
   * `Bearer <key>` (always), `PERMISSION_DENIED` (403) when keys are required and no admin key is
   * configured.
   */
  async authenticateAdmin(authorization: string | null | undefined): Promise<void> {
    const presented = bearerOf(authorization);
    if (this.adminKeyHash) {
      if (presented && timingSafeEqual(sha256(presented), this.adminKeyHash)) return;
      throw new EngineError('UNAUTHENTICATED', 'managing API keys needs the admin key (IRONFLOW_ADMIN_KEY) as Authorization: Bearer');
    }
    if (!(await this.mode()).required) return;
    throw new EngineError('PERMISSION_DENIED', 'API keys are managed with the admin key: set IRONFLOW_ADMIN_KEY on the api-gateway');
  }

  /** The key's row when `presented` is a well-formed key whose hash matches; revoked rows included. */
  private async verify(presented: string): Promise<ApiKeyRecord | null> {
    const match = KEY_SHAPE.exec(presented);
    if (!match) return null;
    const record = await this.lookup(match[1]);
    if (!record) return null;
    return timingSafeEqual(sha256(presented), Buffer.from(record.keyHash, 'hex')) ? record : null;
  }

  private async lookup(id: string): Promise<ApiKeyRecord | null> {
    const now = Date.now();
    const cached = this.cache.get(id);
    if (cached && now - cached.at < this.cacheMs) return cached.record;
    const record = await this.store.read('getApiKey', (tx) => apiKeysSql.getApiKey(tx, id));
    this.cache.delete(id);
    this.cache.set(id, { record, at: now });
    if (this.cache.size > CACHE_ENTRIES) this.cache.delete(this.cache.keys().next().value!);
    return record;
  }
}

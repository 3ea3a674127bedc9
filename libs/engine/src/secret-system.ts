import { CallScope, EngineError, InvocationError, RUN_ERROR_CODES, SecretView } from '@ironflow/contracts';
import { SecretInfo, Store, Tx, secretsSql } from '@ironflow/store';
import { SecretCipher } from './secret-cipher';

/** Secret names: a letter or `_` first, then letters, digits, `_`, `.`, `-`; at most 128. */
const SECRET_NAME = /^[A-Za-z_][A-Za-z0-9_.-]{0,127}$/;
/** Largest secret value, in bytes (UTF-8). */
export const MAX_SECRET_VALUE_BYTES = 64 * 1024;
/** Most secrets one function may declare. */
export const MAX_FUNCTION_SECRETS = 100;

/** The secrets of one segment: their values by name, or the error its attempt fails with. */
export type SecretResolution = { values: Record<string, string> } | { error: InvocationError };

/** Throws `VALIDATION_ERROR` for a name that is not a secret name; `what` names the field. */
export function checkSecretName(name: unknown, what = 'name'): string {
  if (typeof name !== 'string' || !SECRET_NAME.test(name)) {
    throw new EngineError('VALIDATION_ERROR', `${what}: a secret name is a letter or "_" followed by letters, digits, "_", "." or "-" (at most 128), got ${JSON.stringify(String(name).slice(0, 80))}`);
  }
  return name;
}

/**
 * The secret store (issue 9, item 4): values encrypted at rest with AES-256-GCM under
 * `IRONFLOW_SECRETS_KEY` ({@link SecretCipher}), per project and env. Values leave it only in the
 * segments of the functions that declare them ({@link resolve}); the API lists names and times,
 * and nothing here logs a value.
 */
export class SecretSystem {
  /** `cipher` is absent when the process has no `IRONFLOW_SECRETS_KEY`: setting and delivering secrets then fail with a clear code. */
  constructor(
    private readonly store: Store,
    private readonly cipher: SecretCipher | undefined,
  ) {}

  /** True when this process holds a secrets key. */
  get configured(): boolean {
    return this.cipher !== undefined;
  }

  /**
   * Creates or replaces a secret. Throws `VALIDATION_ERROR` (bad name, a value that is not a
   * non-empty string or is over 64 KiB) and `SECRETS_NOT_CONFIGURED` (503) without a secrets key.
   */
  async set(scope: CallScope, name: string, value: unknown): Promise<SecretView> {
    checkSecretName(name);
    if (typeof value !== 'string' || value === '') throw new EngineError('VALIDATION_ERROR', 'value: a non-empty string');
    if (Buffer.byteLength(value, 'utf8') > MAX_SECRET_VALUE_BYTES) throw new EngineError('VALIDATION_ERROR', `value: at most ${MAX_SECRET_VALUE_BYTES} bytes`);
    const cipher = this.requireCipher();
    const ciphertext = cipher.encrypt(identity(scope.project, scope.env, name), value);
    const info = await this.store.unitOfWork('setSecret', (tx) => secretsSql.upsertSecret(tx, scope.project, scope.env, name, ciphertext));
    return view(info);
  }

  /** The secrets of the scope, by name: names and times only. */
  async list(scope: CallScope): Promise<SecretView[]> {
    const rows = await this.store.read('listSecrets', (tx) => secretsSql.listSecrets(tx, scope.project, scope.env));
    return rows.map(view);
  }

  /** Deletes a secret. Throws `SECRET_NOT_FOUND` (404) when the scope has none by that name. */
  async delete(scope: CallScope, name: string): Promise<void> {
    checkSecretName(name);
    const deleted = await this.store.unitOfWork('deleteSecret', (tx) => secretsSql.deleteSecret(tx, scope.project, scope.env, name));
    if (!deleted) throw new EngineError('SECRET_NOT_FOUND', `secret ${name} does not exist in project ${scope.project}, env ${scope.env}`);
  }

  /**
   * The values of `names` in (`project`, `env`), read in the claim's transaction. A missing
   * secret → error `SECRET_NOT_FOUND` naming every missing one; no key, or a value this key
   * cannot decrypt → `SECRETS_UNAVAILABLE`. Both retryable (an operator can set the secret or
   * the key), neither carries a value.
   */
  async resolve(tx: Tx, project: string, env: string, names: readonly string[]): Promise<SecretResolution> {
    if (!this.cipher) {
      return { error: { message: 'this dispatcher has no IRONFLOW_SECRETS_KEY, so it cannot deliver the secrets the function declares', code: RUN_ERROR_CODES.SECRETS_UNAVAILABLE, retryable: true } };
    }
    const stored = await secretsSql.getSecretCiphertexts(tx, project, env, names);
    const missing = names.filter((n) => !stored.has(n));
    if (missing.length > 0) {
      return { error: { message: `secret(s) ${missing.join(', ')} declared by the function do not exist in project ${project}, env ${env}`, code: RUN_ERROR_CODES.SECRET_NOT_FOUND, retryable: true } };
    }
    const values: Record<string, string> = {};
    for (const name of names) {
      try {
        values[name] = this.cipher.decrypt(identity(project, env, name), stored.get(name)!);
      } catch {
        return { error: { message: `secret ${name} cannot be decrypted with this dispatcher's IRONFLOW_SECRETS_KEY (was it set with another key?)`, code: RUN_ERROR_CODES.SECRETS_UNAVAILABLE, retryable: true } };
      }
    }
    return { values };
  }

  private requireCipher(): SecretCipher {
    if (!this.cipher) throw new EngineError('SECRETS_NOT_CONFIGURED', 'secrets need IRONFLOW_SECRETS_KEY (32 bytes, base64 or hex) on the api-gateway and the dispatchers');
    return this.cipher;
  }
}

/** The additional authenticated data binding a ciphertext to its row. */
function identity(project: string, env: string, name: string): string {
  return `${project}/${env}/${name}`;
}

function view(info: SecretInfo): SecretView {
  return { name: info.name, createdAt: new Date(info.createdAt).toISOString(), updatedAt: new Date(info.updatedAt).toISOString() };
}

/** An API key as listings show it (`GET /api/v1/api-keys`): never the key, never its hash. Times ISO-8601. */
export interface ApiKeyView {
  id: string;
  /** What the key starts with (`ifk_<id>`), to recognise it. */
  prefix: string;
  project: string;
  env: string;
  name: string;
  createdAt: string;
  revokedAt?: string;
}

/** A secret as the API shows it (`GET /api/v1/secrets`): never its value. Times ISO-8601. */
export interface SecretView {
  name: string;
  createdAt: string;
  updatedAt: string;
}

/**
 * A database URL as it may be shown (start-up lines, error messages): the password of its
 * user-info part and a `password` query parameter (PostgreSQL connection strings take one too)
 * become `***`. A URL with neither is returned unchanged (a SQLite path keeps its spelling); one
 * that does not parse as a URL has everything between `//user:` and its last `@` replaced.
 */
export function redactDatabaseUrl(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return url.replace(/\/\/([^:/@]*):.*@/, '//$1:***@');
  }
  const passwordKeys = [...parsed.searchParams.keys()].filter((key) => key.toLowerCase() === 'password');
  if (!parsed.password && passwordKeys.length === 0) return url;
  if (parsed.password) parsed.password = '***';
  for (const key of passwordKeys) parsed.searchParams.set(key, '***');
  return parsed.toString();
}

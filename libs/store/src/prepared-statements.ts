/** How many statement texts a process prepares at most (PostgreSQL keeps each per connection that ran it). */
export const PREPARED_STATEMENT_LIMIT = 200;
/** How many times a text must run before it is prepared: a text run once (a one-off) is never prepared. */
export const PREPARED_STATEMENT_MIN_USES = 2;
/**
 * A text with more parameters than this is never prepared: long `IN` lists and multi-row `VALUES`
 * are the texts whose shape varies with their data.
 */
export const PREPARED_STATEMENT_MAX_PARAMETERS = 32;
/** How many texts not yet prepared are counted at most; past it a new text is never prepared. */
const COUNTED_TEXT_LIMIT = 2000;

/**
 * Which PostgreSQL statement texts run as named prepared statements (issue 11: a named statement
 * is parsed once per connection, and PostgreSQL may keep its plan, instead of parsing and planning
 * it on every execution). A text with parameters is given a name on its second use, while the
 * process has named fewer than `limit` texts (default {@link PREPARED_STATEMENT_LIMIT}) and it has
 * at most {@link PREPARED_STATEMENT_MAX_PARAMETERS} parameters; every other text runs unnamed, as
 * before. The store's SQL is mostly fixed text, so the hot path's statements are named within
 * their first runs. Texts built with a variable shape: long ones (many-row `VALUES`, long `IN`
 * lists) are never named, short ones take a name like any other text, and the bound caps what
 * they can cost: at most `limit` statements on each connection, never more.
 *
 * Names are per process (`ironflow_<n>`), and the `pg` driver tracks per connection which it has
 * parsed, so a new connection (after a reconnect or a server restart) parses each again on first use.
 */
export class PreparedStatementNames {
  private readonly names = new Map<string, string>();
  private readonly uses = new Map<string, number>();

  constructor(
    readonly limit = PREPARED_STATEMENT_LIMIT,
    readonly minUses = PREPARED_STATEMENT_MIN_USES,
  ) {}

  /** The name `text` runs under, or `undefined` to run it unnamed. Counts this use of the text. */
  nameOf(text: string, parameterCount: number): string | undefined {
    // No parameters: PostgreSQL's simple protocol, where multi-statement texts stay possible.
    if (parameterCount === 0 || parameterCount > PREPARED_STATEMENT_MAX_PARAMETERS) return undefined;
    const known = this.names.get(text);
    if (known !== undefined) return known;
    if (this.names.size >= this.limit) return undefined;
    const uses = (this.uses.get(text) ?? 0) + 1;
    if (uses < this.minUses) {
      if (this.uses.size < COUNTED_TEXT_LIMIT) this.uses.set(text, uses);
      return undefined;
    }
    this.uses.delete(text);
    const name = `ironflow_${this.names.size + 1}`;
    this.names.set(text, name);
    return name;
  }

  /** How many texts have a name. */
  get size(): number {
    return this.names.size;
  }
}

/**
 * Whether `err` is PostgreSQL refusing a prepared statement whose result columns changed since it
 * was prepared (`cached plan must not change result type`, SQLSTATE 0A000): another process
 * altered a table under a `SELECT *` or `RETURNING *` (a migration of a rolling upgrade). The
 * statement stays unusable on that connection, so the store drops the connection.
 */
export function isStalePreparedStatement(err: unknown): boolean {
  const e = err as { driverError?: { code?: unknown; message?: unknown }; code?: unknown; message?: unknown } | null;
  const code = e?.driverError?.code ?? e?.code;
  const message = String(e?.driverError?.message ?? e?.message ?? '');
  return code === '0A000' && message.includes('cached plan must not change result type');
}

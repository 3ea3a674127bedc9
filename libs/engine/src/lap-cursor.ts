/** A row's place in a pass's order: its creation time, then a unique id. */
export interface LapKey {
  createdAt: number;
  id: string;
}

/**
 * The keyset cursor of a pass that goes round in laps (DESIGN.md principle 5, "every loop makes
 * progress past a bad row"). A lap reads, a page a call, the rows created up to the moment it
 * began less `graceMs`, oldest first, and starts again from the oldest once a page comes back
 * short. Rows the pass skips (a failed read, a locked row) come up again next lap, and rows
 * created during a lap wait for the next one, so neither a long run of rows it keeps skipping nor
 * a full page of new rows on every call can hide a row from it for good.
 */
export class LapCursor {
  private after: LapKey | null = null;
  private lapUpTo: number | null = null;

  /**
   * Reads the next page: `read(createdUpTo, after, limit)` returns up to `limit` rows created at or
   * before `createdUpTo` after the key `after`, in key order; `keyOf` gives a row's key.
   */
  async next<T>(
    now: number,
    graceMs: number,
    limit: number,
    read: (createdUpTo: number, after: LapKey | null, limit: number) => Promise<T[]>,
    keyOf: (row: T) => LapKey,
  ): Promise<T[]> {
    const upTo = (this.lapUpTo ??= now - graceMs);
    const rows = await read(upTo, this.after, limit);
    if (rows.length < limit) {
      this.after = null;
      this.lapUpTo = null;
    } else {
      this.after = keyOf(rows[rows.length - 1]);
    }
    return rows;
  }
}

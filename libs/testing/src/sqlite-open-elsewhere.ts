import { execFile } from 'node:child_process';

/**
 * Tries to open the SQLite file at `path` from another process, as a second `ironflow dev` would
 * (better-sqlite3, `busy_timeout` 500 ms, switching to WAL: the first statement that needs the
 * file's lock). Resolves `'opened'`, or the error SQLite gave (`database is locked` while a process
 * holds the file exclusively). A child process, not a second connection here: SQLite shares the
 * lock state of one file among the connections of a process, and a file whose inode number an
 * earlier test's file had can meet that file's state.
 */
export function openSqliteElsewhere(path: string): Promise<string> {
  const script = `
    const Database = require('better-sqlite3');
    try {
      const db = new Database(process.argv[1], { timeout: 500 });
      db.pragma('journal_mode = WAL');
      db.close();
      process.stdout.write('opened');
    } catch (err) {
      process.stdout.write(String(err && err.message));
    }`;
  return new Promise((resolve, reject) => {
    execFile(process.execPath, ['-e', script, path], { cwd: process.cwd(), timeout: 20_000 }, (err, stdout) => (err ? reject(err) : resolve(stdout)));
  });
}

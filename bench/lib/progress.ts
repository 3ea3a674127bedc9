/**
 * A progress bar on stderr: `cli-progress` when it is installed, else a one-line indicator
 * rewritten with `\r` (on a non-TTY stderr, one line every 10 %).
 */
export interface Progress {
  update(done: number): void;
  stop(): void;
}

interface CliProgressBar {
  start(total: number, start: number, payload?: Record<string, unknown>): void;
  update(value: number): void;
  stop(): void;
}

function loadCliProgress(): { SingleBar: new (opts: Record<string, unknown>, preset: unknown) => CliProgressBar; Presets: Record<string, unknown> } | null {
  try {
    // eslint-disable-next-line @typescript-eslint/no-var-requires
    return require('cli-progress');
  } catch {
    return null;
  }
}

export function progress(label: string, total: number): Progress {
  const cli = loadCliProgress();
  if (cli) {
    const bar = new cli.SingleBar(
      { format: `${label} [{bar}] {percentage}% | {value}/{total} | ETA {eta}s`, stream: process.stderr, hideCursor: true },
      cli.Presets.shades_classic,
    );
    bar.start(total, 0);
    return { update: (done) => bar.update(done), stop: () => bar.stop() };
  }
  return new FallbackProgress(label, total);
}

class FallbackProgress implements Progress {
  private readonly started = Date.now();
  private lastDraw = 0;
  private lastDecile = -1;
  private readonly tty = !!process.stderr.isTTY;

  constructor(private readonly label: string, private readonly total: number) {
    this.draw(0, true);
  }

  update(done: number): void {
    this.draw(done, false);
  }

  stop(): void {
    this.draw(this.total, this.tty);
    if (this.tty) process.stderr.write('\n');
  }

  private draw(done: number, force: boolean): void {
    const fraction = this.total > 0 ? Math.min(1, done / this.total) : 1;
    if (!this.tty) {
      const decile = Math.floor(fraction * 10);
      if (decile === this.lastDecile && !force) return;
      this.lastDecile = decile;
      process.stderr.write(`${this.label} ${Math.round(fraction * 100)}% ${done}/${this.total}\n`);
      return;
    }
    const now = Date.now();
    if (!force && now - this.lastDraw < 100) return;
    this.lastDraw = now;
    const width = 30;
    const filled = Math.round(fraction * width);
    const elapsed = (now - this.started) / 1000;
    const eta = fraction > 0 ? Math.max(0, elapsed / fraction - elapsed) : 0;
    const bar = '#'.repeat(filled) + '-'.repeat(width - filled);
    process.stderr.write(`\r${this.label} [${bar}] ${String(Math.round(fraction * 100)).padStart(3)}% ${done}/${this.total} ETA ${eta.toFixed(0)}s `);
  }
}

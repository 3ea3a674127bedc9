#!/usr/bin/env node
import { EXIT_CODES } from './print';
import { runCli } from './program';

// Exit codes (EXIT_CODES): 0 ok, 1 error, 2 run failed or cancelled, 3 timed out, 4 not cancelled. `dev` keeps the
// process alive after its action returned, so success only sets the code; an error exits at once
// (as before: a half-started `dev` must not linger).
runCli(process.argv).then(
  (code) => {
    if (code === EXIT_CODES.error) process.exit(code);
    process.exitCode = code;
  },
  (err: unknown) => {
    console.error(`error [ERROR]: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(EXIT_CODES.error);
  },
);

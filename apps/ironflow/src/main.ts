#!/usr/bin/env node
import { buildProgram } from './program';

buildProgram()
  .parseAsync(process.argv)
  .catch((err: unknown) => {
    const e = err as { code?: string; message?: string };
    console.error(`error${e.code ? ` [${e.code}]` : ''}: ${e.message ?? String(err)}`);
    process.exit(1);
  });

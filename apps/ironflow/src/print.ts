import { ListRunsOutput, RunView } from '@ironflow/contracts';
import { RunSteps } from '@ironflow/sdk';

/** Human-readable `run get`: the run, its steps, its child runs and its history. */
export function printRun(run: RunView, detail: RunSteps): void {
  const lines = [
    `run ${run.id}`,
    `  function   ${run.functionId} (v${run.functionVersion}, ${run.executionMode})`,
    `  status     ${run.status}`,
    `  attempt    ${run.attempt} of ${run.maxAttempts}`,
    `  created    ${run.createdAt}${run.endedAt ? `   ended ${run.endedAt}` : ''}`,
  ];
  if (run.parentRunId) lines.push(`  parent     ${run.parentRunId} (step ${run.parentStepId})`);
  if (run.output !== undefined) lines.push(`  output     ${JSON.stringify(run.output)}`);
  if (run.error) lines.push(`  error      ${run.error.code ? `[${run.error.code}] ` : ''}${run.error.message}`);
  lines.push('', `steps (${detail.steps.length})`);
  for (const s of detail.steps) {
    const extra = s.childRunId ? ` child ${s.childRunId}` : s.wakeAt ? ` until ${s.wakeAt}` : '';
    const value = s.output !== undefined ? ` → ${JSON.stringify(s.output)}` : s.error !== undefined ? ` ✗ ${JSON.stringify(s.error)}` : '';
    lines.push(`  ${String(s.sequence).padStart(2)} ${s.type.padEnd(14)} ${s.name.padEnd(20)} ${s.status.padEnd(9)}${extra}${value}`);
  }
  if (detail.children.length) {
    lines.push('', `child runs (${detail.children.length})`);
    for (const c of detail.children) lines.push(`  ${c.id} ${c.functionId} ${c.status}, attempt ${c.attempt} of ${c.maxAttempts}`);
  }
  if (detail.history.length) {
    lines.push('', 'history');
    for (const h of detail.history) lines.push(`  ${h.ts} ${h.eventType}${h.cause ? `: ${h.cause}` : ''}`);
  }
  console.log(lines.join('\n'));
}

export function printRunList(res: ListRunsOutput): void {
  for (const r of res.runs) console.log(`${r.id}  ${r.functionId.padEnd(24)} ${r.status.padEnd(20)} ${r.createdAt}`);
  console.log(`${res.runs.length} of ${res.totalCount} run(s)${res.nextCursor ? `; next page: --cursor ${res.nextCursor}` : ''}`);
}

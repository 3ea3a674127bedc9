import { AuditSink, AuditWriteOptions, ScopedAuditRow } from './audit-recorder';
import { AuditWriter } from './audit-writer';

/** The audit sink of `ironflow dev` and tests: the recorder calls the writer in this process. */
export class InProcessAuditSink implements AuditSink {
  constructor(private readonly writer: AuditWriter) {}

  write(rows: ScopedAuditRow[], options: AuditWriteOptions): Promise<void> {
    return this.writer.write(rows, options);
  }
}

/**
 * Ironflow TypeScript SDK: durable functions (`createFunction`, `step.*`), the push endpoint
 * (`serve`), the pull workers (`createWorker`: REST, or `transport: 'stream'` / `createStreamWorker`
 * for the `WorkerService.Connect` stream over gRPC) and the API client (`createClient`).
 * Wire formats: `/work/shared/WIRE-PROTOCOL.md` sections 1–5.
 */
export { createFunction } from './function';
export type { FunctionConfig, Handler, HandlerContext, IronflowEvent, IronflowFunction, RunInfo } from './function';

export type { Duration } from './duration';
export { DEFAULT_INVOKE_TIMEOUT_MS, DEFAULT_WAIT_TIMEOUT } from './step-tools';
export type { InvokeOptions, MemoizedStep, ResumeInfo, RunStepOptions, StepTools, WaitForEventOptions } from './step-tools';
export { escapeStepName } from './step-id';

export { executeInvocation, toInvocationError } from './execute';
export type { InvocationInput, InvocationOutcome, Transport } from './execute';

export {
  IronflowClientError,
  IronflowError,
  InvokeError,
  NonRetryableError,
  RetryableError,
  RunCancelledError,
  RunFailedError,
  StepError,
  StepsAbortedError,
  StepTimeoutError,
} from './errors';
export type { IronflowErrorOptions, RunErrorInfo } from './errors';

export { SERVE_KEEP_ALIVE_MS, listen, serve } from './serve';
export type { ServeOptions } from './serve';
export { signPushBody, verifyPushSignature } from './signature';

export { createWorker } from './worker-factory';
export type { AnyWorkerOptions } from './worker-factory';
export type { Worker, WorkerLogger, WorkerOptions } from './worker';
export { createStreamWorker } from './stream-worker';
export type { StreamWorker, StreamWorkerOptions } from './stream-worker';

export { createClient } from './client';
export type { ApiKeyInfo, SecretInfo } from './client';
export type { ClientOptions, EmitOptions, EmitSyncOptions, EmitSyncResult, InvokeResult, FunctionRegistration, IronflowClient, ListEventsFilter, ListRunsFilter, PausedState, RunSteps, TopicInfo, WaitForRunOptions } from './client';
export { createPublisher } from './publish';
export type { PublishResult, PublishTarget, Publisher } from './publish';
export type { SubscribeOptions, Subscription, SubscriptionEvent } from './subscribe';

export { DEFAULT_ENVIRONMENT, DEFAULT_SERVER_URL, SDK_VERSION } from './settings';

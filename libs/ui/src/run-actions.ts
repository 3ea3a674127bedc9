import { Run, UiConfig, api } from './api.js';

/**
 * The buttons a run detail page offers, in one place. `shows` decides from the run and from what
 * the server offers (`UiConfig`, served at `/ui/config.json`: pause/resume appear only once the
 * API has `PauseRun`/`ResumeRun`); `perform` calls the API; `confirm` asks first.
 */
export interface RunAction {
  label: string;
  testid: string;
  danger?: boolean;
  confirm?: string;
  shows(run: Run, config: UiConfig): boolean;
  perform(run: Run): Promise<unknown>;
}

const TERMINAL = new Set(['completed', 'failed', 'cancelled']);
const PAUSABLE = new Set(['running', 'waiting', 'waiting_for_capacity']);

export const RUN_ACTIONS: RunAction[] = [
  {
    label: 'Cancel run',
    testid: 'cancel-run',
    danger: true,
    confirm: 'Cancel this run? Its steps stop at the next boundary and the outcome becomes "cancelled".',
    shows: (run) => !TERMINAL.has(run.status),
    perform: (run) => api.cancelRun(run.id, 'cancelled from the UI'),
  },
  {
    label: 'Pause',
    testid: 'pause-run',
    shows: (run, config) => config.actions.pause && PAUSABLE.has(run.status),
    perform: (run) => api.pauseRun(run.id, 'paused from the UI'),
  },
  {
    label: 'Resume',
    testid: 'resume-run',
    shows: (run, config) => config.actions.resume && run.status === 'paused',
    perform: (run) => api.resumeRun(run.id),
  },
];

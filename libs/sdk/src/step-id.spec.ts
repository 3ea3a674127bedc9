import { formatDuration, toMs } from './duration';
import { StepIdAllocator, escapeStepName } from './step-id';

describe('escapeStepName', () => {
  it('leaves names without ":" or "\\" unchanged', () => {
    expect(escapeStepName('charge-card')).toBe('charge-card');
    expect(escapeStepName('a.b c')).toBe('a.b c');
  });

  it('escapes backslashes first, then colons', () => {
    expect(escapeStepName('charge:card')).toBe('charge\\:card');
    expect(escapeStepName('a\\b')).toBe('a\\\\b');
    expect(escapeStepName('a\\:b')).toBe('a\\\\\\:b');
  });

  it('keeps a leading compensate: or publish: prefix literal and escapes the rest', () => {
    expect(escapeStepName('compensate:charge')).toBe('compensate:charge');
    expect(escapeStepName('compensate:charge:card')).toBe('compensate:charge\\:card');
    expect(escapeStepName('publish:orders')).toBe('publish:orders');
    expect(escapeStepName('publish:a:b')).toBe('publish:a\\:b');
    expect(escapeStepName('x:compensate:y')).toBe('x\\:compensate\\:y');
  });
});

describe('StepIdAllocator', () => {
  it('counts uses per name from 0', () => {
    const ids = new StepIdAllocator('run-1');
    expect([ids.next('a'), ids.next('b'), ids.next('a'), ids.next('a'), ids.next('b')]).toEqual([
      'run-1:a:0',
      'run-1:b:0',
      'run-1:a:1',
      'run-1:a:2',
      'run-1:b:1',
    ]);
  });

  it('escapes names in ids', () => {
    expect(new StepIdAllocator('run-123').next('charge:card')).toBe('run-123:charge\\:card:0');
  });

  it('uses the legacy unescaped id only when it alone is memoized', () => {
    const legacyOnly = new StepIdAllocator('run-123', (id) => id === 'run-123:charge:card:0');
    expect(legacyOnly.next('charge:card')).toBe('run-123:charge:card:0');
    expect(legacyOnly.next('charge:card')).toBe('run-123:charge\\:card:1');

    const both = new StepIdAllocator('run-123', (id) => id === 'run-123:charge:card:0' || id === 'run-123:charge\\:card:0');
    expect(both.next('charge:card')).toBe('run-123:charge\\:card:0');
  });
});

describe('durations', () => {
  it('parses numbers and ms strings', () => {
    expect(toMs(1500)).toBe(1500);
    expect(toMs('2s')).toBe(2000);
    expect(toMs('1.5h')).toBe(5_400_000);
    expect(toMs('7d')).toBe(604_800_000);
    expect(() => toMs('soon')).toThrow(RangeError);
    expect(() => toMs('')).toThrow(RangeError);
    expect(() => toMs(Number.NaN)).toThrow(RangeError);
  });

  it('formats ms in the largest whole unit, floored', () => {
    expect(formatDuration(90_000)).toBe('1m');
    expect(formatDuration(86_400_000)).toBe('1d');
    expect(formatDuration(172_800_001)).toBe('2d');
    expect(formatDuration(5_400_000)).toBe('1h');
    expect(formatDuration(1_500)).toBe('1s');
    expect(formatDuration(999)).toBe('999ms');
  });
});

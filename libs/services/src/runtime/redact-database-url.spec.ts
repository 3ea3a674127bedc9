import { redactDatabaseUrl } from './redact-database-url';

describe('redactDatabaseUrl', () => {
  it('hides the password of the user-info part, whatever it contains', () => {
    expect(redactDatabaseUrl('postgres://ironflow:s3cret@db.internal:5432/ironflow')).toBe('postgres://ironflow:***@db.internal:5432/ironflow');
    expect(redactDatabaseUrl('postgres://ironflow:p@ss:w/rd@db:5432/x')).not.toContain('ss:w');
  });

  it('hides a password query parameter', () => {
    expect(redactDatabaseUrl('postgresql://ironflow@db/x?sslmode=require&password=s3cret')).toBe('postgresql://ironflow@db/x?sslmode=require&password=***');
  });

  it('leaves a URL without a password as it was written', () => {
    for (const url of ['postgres://postgres@127.0.0.1:5432/postgres', 'sqlite:/work/my dir/.ironflow/dev.db', 'sqlite:.ironflow/dev.db']) {
      expect(redactDatabaseUrl(url)).toBe(url);
    }
  });

  it('redacts a URL that does not parse up to its last @', () => {
    expect(redactDatabaseUrl('postgres://u:pa@ss@[bad')).toBe('postgres://u:***@[bad');
  });
});

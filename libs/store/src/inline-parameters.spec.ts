import { Client } from 'pg';
import { inlineParameters } from './inline-parameters';
import { testDatabaseUrl } from '@ironflow/testing';

describe('inlineParameters', () => {
  it('writes each value as the driver would send it, quoted; null and undefined as NULL', () => {
    expect(inlineParameters('SELECT $1, $2, $3, $4, $5', ['a', 5, true, null, undefined])).toBe(`SELECT 'a', '5', 'true', NULL, NULL`);
    expect(inlineParameters('SELECT $1::text[], $2::jsonb', [['x', null], { k: "it's" }])).toBe(`SELECT '{"x",NULL}'::text[], '{"k":"it''s"}'::jsonb`);
    expect(inlineParameters('SELECT $10, $1', ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j'])).toBe(`SELECT 'j', 'a'`);
  });

  it('leaves placeholders inside quoted strings, quoted names and comments as they are', () => {
    expect(inlineParameters(`SELECT '$1', "$1", $1 -- $1\n, E'\\' $1', $1 /* $1 */`, ['v'])).toBe(`SELECT '$1', "$1", 'v' -- $1\n, E'\\' $1', 'v' /* $1 */`);
  });

  it('is undefined for what it cannot write safely: a binary value, U+0000, a dollar-quoted string, a name holding $, a placeholder without a value', () => {
    expect(inlineParameters('SELECT $1', [Buffer.from('a')])).toBeUndefined();
    expect(inlineParameters('SELECT $1', ['a\u0000b'])).toBeUndefined();
    expect(inlineParameters('SELECT $$ $1 $$, $1', ['a'])).toBeUndefined();
    expect(inlineParameters('SELECT a$1 FROM t WHERE x = $1', ['a'])).toBeUndefined();
    expect(inlineParameters('SELECT $2', ['a'])).toBeUndefined();
  });
});

/** PostgreSQL reads an inlined statement as it reads the same statement with parameters. */
describe('inlineParameters [postgres]', () => {
  let client: Client;
  beforeAll(async () => {
    client = new Client({ connectionString: testDatabaseUrl() });
    await client.connect();
  });
  afterAll(async () => {
    await client?.end();
  });

  it('gives the rows the parameters give, for quotes, backslashes, unicode, arrays, JSON, numbers and NULL', async () => {
    const sql = `SELECT $1::text AS t, $2::text[] AS a, $3::jsonb AS j, $4::bigint AS n, $5::boolean AS b, $6::text IS NULL AS missing, $7::float8 AS f, octet_length($8::text) AS bytes`;
    const params = [
      `it's a \\ back'slash; $2 -- "quoted" /* no */ E'x'`,
      ['a,b', '{brace}', 'quote"d', 'back\\slash', null, ''],
      { nested: { list: [1, 'two', null], text: "o'k \\ \u00e9 \u{1F600}" } },
      '9007199254740993',
      false,
      null,
      -1.5e-7,
      '\u00e9\u{1F600}',
    ];
    const inlined = inlineParameters(sql, params);
    expect(inlined).toBeDefined();
    const withParameters = (await client.query(sql, params)).rows;
    const asLiterals = (await client.query(inlined!)).rows;
    expect(asLiterals).toEqual(withParameters);
    expect(asLiterals[0]).toMatchObject({ t: params[0], a: params[1], j: params[2], n: '9007199254740993', b: false, missing: true, f: -1.5e-7, bytes: 6 });
  });
});

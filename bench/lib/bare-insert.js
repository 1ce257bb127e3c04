'use strict';
// The baseline of the ingest benchmarks: a bare multi-row INSERT of rows the service stored.
const { performance } = require('node:perf_hooks');

/**
 * Rows per second of a bare multi-row INSERT (1000 rows per statement, the named columns) of
 * every row of `table` into a new table of the same shape, indexes included, in the same
 * database (`db`: a connected pg Client); the new table is dropped afterwards. The rows are read
 * first and not timed. In a function of its own so they are garbage once it returns.
 */
async function bareInsertRate(db, { table, columns, orderBy }) {
  await db.query(`CREATE TABLE bench_bare (LIKE ${table} INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING INDEXES)`);
  const rows = (await db.query(`SELECT ${columns.join(', ')} FROM ${table}${orderBy ? ` ORDER BY ${orderBy}` : ''}`)).rows;
  const started = performance.now();
  for (let i = 0; i < rows.length; i += 1000) {
    const values = [];
    const tuples = rows.slice(i, i + 1000).map((row, j) => {
      for (const c of columns) values.push(row[c]);
      return `(${columns.map((_, k) => `$${j * columns.length + k + 1}`).join(',')})`;
    });
    await db.query(`INSERT INTO bench_bare (${columns.join(', ')}) VALUES ${tuples.join(',')}`, values);
  }
  const rate = rows.length / ((performance.now() - started) / 1000);
  await db.query('DROP TABLE bench_bare');
  return rate;
}

module.exports = { bareInsertRate };

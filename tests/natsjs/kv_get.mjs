// nats.js reads keys of a bucket, as nats.js's own cross-domain mirror test
// does: `new Kvm(js).create(bucket)` on an existing bucket binds to it and
// reads its stream config, so a mirror is read where it holds its origin's
// subjects.
//
//   node kv_get.mjs URL BUCKET KEY...
//
// Prints one JSON line: {"prefix": the subject prefix nats.js reads,
// "values": {KEY: utf-8 value, or null when nats.js finds none}}.

import { argv } from "node:process";

import { jetstream } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { connect } from "@nats-io/transport-node";

const [url, bucket, ...keys] = argv.slice(2);
const nc = await connect({ servers: url, timeout: 10_000 });
try {
  const kv = await new Kvm(jetstream(nc)).create(bucket);
  const values = {};
  for (const k of keys) {
    const e = await kv.get(k);
    values[k] = e === null || e.operation !== "PUT" ? null : e.string();
  }
  console.log(JSON.stringify({ prefix: kv.prefix, values }));
} finally {
  await nc.close();
}

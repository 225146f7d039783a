// nats.js runs of three jsbench rows, for comparison with jsclient's:
// js-atomic-batch, js-fast-ingest and direct-get-batch, with the counts,
// payload size and streams of jsbench/batch.py and jsbench/direct.py.
// As in jsbench, the parent prepares the streams and checks what was stored,
// and every (workload, round) runs in a fresh process of its own (a child of
// this one) that times only the work.
//
//   npm ci
//   node bench.mjs nats://127.0.0.1:4222 [--quick] [--only NAME]... [--repeat N]
//
// Run by hand against a server of 2.14 or later (fast ingest needs 2.14).

import { fork } from "node:child_process";
import { readFileSync } from "node:fs";
import { argv, cpuUsage, exit } from "node:process";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { startFastIngest } from "@nats-io/jetstream/internal";
import { connect } from "@nats-io/transport-node";

const SIZE = 16; // bytes per message (every row)
const PUB_STREAM = "BPUB"; // jsbench/js.py: the publish rows' memory stream
const PUB_SUBJECT = "bpub.x";
const DIR_STREAM = "BDIR"; // jsbench/direct.py: the file stream read by direct get
const DIR_SUBJECT = "bdir.fill";
const ATOMIC_BATCH = 100; // jsbench/batch.py BATCH: messages per atomic batch
const FLOW = 100; // jsclient's fast_publisher() default: most messages per flow ack
const MAX_OUTSTANDING_ACKS = 2; // jsclient's default, and nats.js's
const PAGE = 10_000; // jsbench/direct.py PAGE: jsclient's get_batch page
const STREAM_NOT_FOUND = 10059; // JetStream API error code

const WORKLOADS = {
  "js-atomic-batch": {
    n: 50_000,
    quick: 10_000,
    about: `atomic batches of ${ATOMIC_BATCH}: js.startBatch, add, commit; each commit's ack awaited`,
    setup: setupPublish,
    run: atomicBatch,
    check: checkPublished,
  },
  "js-fast-ingest": {
    n: 50_000,
    quick: 10_000,
    about: `one fast-ingest batch (startFastIngest, ackInterval ${FLOW}, each add awaited), end()`,
    setup: setupPublish,
    run: fastIngest,
    check: checkPublished,
  },
  "direct-get-batch": {
    n: 200_000,
    quick: 20_000,
    about: `jsm.direct.getBatch of sequences 1..n, pages of ${PAGE.toLocaleString("en")}`,
    setup: setupDirect,
    run: getBatch,
    check: null,
  },
};

const payload = new Uint8Array(SIZE).fill(0x78); // b"x" * 16, as jsbench

// -- the parent: set-up and checks ---------------------------------------------------

async function removeStream(jsm, name) {
  try {
    await jsm.streams.delete(name);
  } catch (err) {
    if (err?.code !== STREAM_NOT_FOUND) throw err;
  }
}

// A fresh, empty memory stream that takes both kinds of batch (jsbench/batch.py).
async function setupPublish(nc) {
  const jsm = await jetstreamManager(nc);
  await removeStream(jsm, PUB_STREAM);
  await jsm.streams.add({
    name: PUB_STREAM,
    subjects: ["bpub.>"],
    storage: "memory",
    allow_atomic: true,
    allow_batched: true,
  });
}

// The run stored its n messages and its one warm-up publish.
async function checkPublished(nc, n) {
  const jsm = await jetstreamManager(nc);
  const have = (await jsm.streams.info(PUB_STREAM)).state.messages;
  if (have !== n + 1) throw new Error(`the stream stored ${have} of ${n + 1} messages`);
}

// A file stream allowing direct gets holding exactly n messages (jsbench/direct.py;
// a stream jsbench filled with the same count and size is reused, and the other way).
async function setupDirect(nc, n) {
  const jsm = await jetstreamManager(nc);
  const tag = `jsclient bench: ${n} x ${SIZE} B`;
  try {
    const info = await jsm.streams.info(DIR_STREAM);
    if (info.config.description === tag && info.state.messages === n) return;
  } catch (err) {
    if (err?.code !== STREAM_NOT_FOUND) throw err;
  }
  await removeStream(jsm, DIR_STREAM);
  await jsm.streams.add({
    name: DIR_STREAM,
    subjects: ["bdir.>"],
    storage: "file",
    allow_direct: true,
    description: tag,
  });
  const js = jetstream(nc);
  let window = [];
  for (let i = 0; i < n; i++) {
    window.push(js.publish(DIR_SUBJECT, payload));
    if (window.length === 4000) {
      await Promise.all(window);
      window = [];
    }
  }
  await Promise.all(window);
  const have = (await jsm.streams.info(DIR_STREAM)).state.messages;
  if (have !== n) throw new Error(`stream pre-fill stored ${have} of ${n} messages`);
}

// -- the child: the timed work, returning seconds ------------------------------------

async function atomicBatch(nc, n) {
  if (n % ATOMIC_BATCH === 1) throw new Error("a batch of 1 cannot be started and committed");
  const js = jetstream(nc);
  await js.publish(PUB_SUBJECT, payload); // warm-up, as jsbench
  const t0 = performance.now();
  for (let left = n; left > 0; ) {
    const k = Math.min(ATOMIC_BATCH, left);
    const b = await js.startBatch(PUB_SUBJECT, payload); // message 1, a request
    for (let i = 2; i < k; i++) b.add(PUB_SUBJECT, payload);
    const ack = await b.commit(PUB_SUBJECT, payload); // message k commits
    if (ack.count !== k) throw new Error(`batch of ${k} stored as ${ack.count}`);
    left -= k;
  }
  return (performance.now() - t0) / 1000;
}

async function fastIngest(nc, n) {
  const js = jetstream(nc);
  await js.publish(PUB_SUBJECT, payload); // warm-up, as jsbench
  const t0 = performance.now();
  const fi = await startFastIngest(nc, PUB_SUBJECT, payload, {
    allowGaps: false,
    ackInterval: FLOW,
    maxOutstandingAcks: MAX_OUTSTANDING_ACKS,
  });
  for (let i = 1; i < n; i++) await fi.add(PUB_SUBJECT, payload);
  const ack = await fi.end(); // end-of-batch marker, not stored
  const secs = (performance.now() - t0) / 1000;
  if (ack.count !== n) throw new Error(`fast batch of ${n} stored as ${ack.count}`);
  return secs;
}

// getBatch sends one request and does not page: the server sends up to `batch`
// messages (fewer at its byte limit) and a 204 EOB that ends the iterator, or
// a 404 status if nothing is left from `seq` on. So each page starts after the
// last sequence read, until n have come; the count and last sequence are checked.
async function getBatch(nc, n) {
  const jsm = await jetstreamManager(nc);
  let got = 0;
  let last = 0;
  const t0 = performance.now();
  while (got < n) {
    const it = await jsm.direct.getBatch(DIR_STREAM, {
      seq: last + 1,
      batch: Math.min(PAGE, n - got),
    });
    let k = 0;
    let m = null;
    try {
      for await (m of it) k++;
    } catch (err) {
      if (err?.code !== 404) throw err; // a 404 status: nothing from seq on
    }
    if (k === 0) break; // nothing more came: the check below says so
    got += k;
    last = m.seq;
  }
  const secs = (performance.now() - t0) / 1000;
  if (got !== n || last !== n) {
    throw new Error(`read ${got} of ${n} messages, the last at sequence ${last}`);
  }
  return secs;
}

async function child(name, url, n) {
  const nc = await connect({ servers: url });
  try {
    const c0 = cpuUsage();
    const secs = await WORKLOADS[name].run(nc, n);
    const cpu = cpuUsage(c0);
    return { rate: n / secs, cpuUsPerMsg: (cpu.user + cpu.system) / n };
  } finally {
    await nc.close();
  }
}

function runChild(name, url, n) {
  return new Promise((resolve, reject) => {
    const script = fileURLToPath(import.meta.url);
    const proc = fork(script, ["--child", name, "--n", String(n), url]);
    let result = null;
    proc.on("message", (msg) => {
      result = msg;
    });
    proc.on("error", reject);
    proc.on("exit", (code) => {
      if (result?.error) reject(new Error(result.error));
      else if (result && code === 0) resolve(result);
      else reject(new Error(`the child exited with ${code} and no result`));
    });
  });
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

const fmt = (x) => Math.round(x).toLocaleString("en");

async function main() {
  const { values, positionals } = parseArgs({
    args: argv.slice(2),
    allowPositionals: true,
    options: {
      quick: { type: "boolean", default: false },
      only: { type: "string", multiple: true },
      repeat: { type: "string" },
      child: { type: "string" },
      n: { type: "string" },
    },
  });
  const url = positionals[0] ?? "nats://127.0.0.1:4222";
  if (values.child) {
    try {
      process.send(await child(values.child, url, Number(values.n)));
    } catch (err) {
      process.send({ error: String(err?.stack ?? err) });
      process.exitCode = 1;
    }
    return;
  }
  const names = values.only ?? Object.keys(WORKLOADS);
  for (const name of names) {
    if (!(name in WORKLOADS)) {
      console.error(`no workload ${name}; one of ${Object.keys(WORKLOADS).join(", ")}`);
      exit(2);
    }
  }
  const repeat = Number(values.repeat ?? (values.quick ? 1 : 3));
  const pkg = JSON.parse(
    readFileSync(new URL("node_modules/@nats-io/jetstream/package.json", import.meta.url)),
  );
  const nc = await connect({ servers: url });
  console.log(
    `nats.js: @nats-io/jetstream ${pkg.version}, node ${process.version}, ` +
      `nats-server ${nc.info?.version}; ${repeat} round(s), ` +
      `${values.quick ? "quick" : "full"} counts, each run in a fresh process`,
  );
  let failed = false;
  for (const name of names) {
    const w = WORKLOADS[name];
    const n = values.quick ? w.quick : w.n;
    console.log(`${name}: ${w.about}; ${n.toLocaleString("en")} x ${SIZE} B`);
    const rates = [];
    for (let r = 1; r <= repeat; r++) {
      try {
        await w.setup(nc, n);
        const res = await runChild(name, url, n);
        if (w.check) await w.check(nc, n);
        rates.push(res.rate);
        console.log(
          `  round ${r}: ${fmt(res.rate)} msgs/s, CPU ${res.cpuUsPerMsg.toFixed(2)} µs/msg`,
        );
      } catch (err) {
        failed = true;
        console.log(`  round ${r}: FAILED: ${err.message}`);
      }
    }
    if (rates.length) console.log(`  median: ${fmt(median(rates))} msgs/s`);
  }
  await nc.close();
  exit(failed ? 1 : 0);
}

await main();

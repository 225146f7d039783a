// nats.js adds a link to an object with `os.link(name, info)`. nats.js 3.x
// stores such a link's meta as its name, bucket and options.link only: no
// nuid, size, chunks, mtime or digest.
//
//   node obj_link.mjs URL LINK_BUCKET LINK_NAME TARGET_BUCKET TARGET_NAME [DATA]
//
// With DATA, nats.js first makes TARGET_BUCKET (when missing) and puts DATA
// (utf-8) as TARGET_NAME; without it the target must exist. LINK_BUCKET is made
// when missing. Prints one JSON line: the link's meta as stored, and the
// target's nuid and size as nats.js reads them.

import { argv } from "node:process";

import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { Objm } from "@nats-io/obj";
import { connect } from "@nats-io/transport-node";

const [url, linkBucket, linkName, targetBucket, targetName, data] = argv.slice(2);
const nc = await connect({ servers: url, timeout: 10_000 });
try {
  const objm = new Objm(jetstream(nc));
  const target = await objm.create(targetBucket);
  if (data !== undefined) {
    await target.putBlob({ name: targetName }, new TextEncoder().encode(data));
  }
  const info = await target.info(targetName);
  if (info === null) {
    throw new Error(`no object ${targetName} in ${targetBucket}`);
  }
  const store = linkBucket === targetBucket ? target : await objm.create(linkBucket);
  await store.link(linkName, info);
  // The meta as stored, read through the stream API; names are padded base64url.
  const token = Buffer.from(linkName).toString("base64").replaceAll("+", "-")
    .replaceAll("/", "_");
  const jsm = await jetstreamManager(nc);
  const m = await jsm.streams.getMessage(`OBJ_${linkBucket}`, {
    last_by_subj: `$O.${linkBucket}.M.${token}`,
  });
  console.log(JSON.stringify({
    link: m.json(),
    target: { nuid: info.nuid, size: info.size },
  }));
} finally {
  await nc.close();
}

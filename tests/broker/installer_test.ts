import assert from "node:assert/strict";
import { assertSupported, parseServerVersion } from "../../lib/broker/mod.ts";
import {
  findDebianMirror,
  parseDeb822Sources,
  parseOneLineSources,
  readAptSources,
} from "../../lib/debian/mod.ts";
import { isCotalError } from "../../lib/errors.ts";
import { removeTempDir, tempDir } from "../_harness/broker.ts";

Deno.test("broker - version parsing reads nats-server and Debian package versions", () => {
  assert.deepEqual(
    parseServerVersion("nats-server: v2.10.27\n"),
    { major: 2, minor: 10, patch: 27, text: "2.10.27" },
  );
  assert.equal(parseServerVersion("2.15.1-1").text, "2.15.1");
  assert.equal(parseServerVersion("2.10.27-1+b2").minor, 10);
  assert.throws(
    () => parseServerVersion("nats-server: unknown"),
    (e) => isCotalError(e, "broker_version_unparsable"),
  );
});

Deno.test("broker - a 2.9 server is refused with a sentence naming what was found", () => {
  assert.throws(
    () => assertSupported("/opt/nats-server", parseServerVersion("nats-server: v2.9.25")),
    (e) =>
      isCotalError(e, "broker_too_old") && /\/opt\/nats-server is nats-server 2\.9\.25/.test(
        e.message,
      ) && /2\.10 or newer/.test(e.message),
  );
  assertSupported("/x", parseServerVersion("v2.10.0"));
  assertSupported("/x", parseServerVersion("v3.0.0"));
});

Deno.test("broker - NATS_SERVER pointing at a fake 2.9.x binary is refused, not worked around", async () => {
  const dir = await tempDir();
  const fake = `${dir}/nats-server`;
  await Deno.writeTextFile(fake, "#!/bin/sh\necho 'nats-server: v2.9.11'\n");
  await Deno.chmod(fake, 0o755);
  try {
    // In a process of its own: test files running at once share this one's environment, and
    // a broker another file starts meanwhile must not find the fake.
    const find = new URL("../../lib/broker/find.ts", import.meta.url).href;
    const out = await new Deno.Command(Deno.execPath(), {
      args: [
        "eval",
        `import { findServer } from ${JSON.stringify(find)};
         try { await findServer(${JSON.stringify(`${dir}/empty-cache`)}); console.log("found"); }
         catch (e) { console.log(JSON.stringify({ code: e.code, message: e.message })); }`,
      ],
      env: { NATS_SERVER: fake },
      stdout: "piped",
      stderr: "piped",
    }).output();
    const got = JSON.parse(new TextDecoder().decode(out.stdout));
    assert.equal(got.code, "broker_too_old", new TextDecoder().decode(out.stderr));
    assert.ok(got.message.includes("2.9.11"), got.message);
  } finally {
    await removeTempDir(dir);
  }
});

const ONE_LINE = `# comment
deb [arch=amd64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://mirror.example/debian bookworm main contrib
deb-src http://mirror.example/debian bookworm main
deb http://security.example/debian-security bookworm-security main
deb https://vendor.example/apt cloud-sdk-bookworm main
`;

const DEB822 = `Types: deb
URIs: http://mirror.example/debian
Suites: trixie trixie-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.example/debian-security
Suites: trixie-security
Components: main

Types: deb
Enabled: no
URIs: http://disabled.example/debian
Suites: sid
Components: main
`;

Deno.test("broker - apt one-line sources: the Debian archive mirror is found, others skipped", () => {
  const sources = parseOneLineSources(ONE_LINE);
  assert.equal(sources.length, 3);
  const m = findDebianMirror(sources);
  assert.equal(m?.uri, "http://mirror.example/debian");
  assert.equal(m?.signedBy, "/usr/share/keyrings/debian-archive-keyring.gpg");
  assert.equal(
    findDebianMirror(parseOneLineSources("deb https://vendor.example/apt cloud-sdk-bookworm main")),
    undefined,
  );
});

Deno.test("broker - apt deb822 sources: stanzas, multi-suite lines and Enabled: no", () => {
  const sources = parseDeb822Sources(DEB822);
  assert.equal(sources.length, 2);
  assert.deepEqual(sources[0].suites, ["trixie", "trixie-updates"]);
  assert.equal(findDebianMirror(sources)?.uri, "http://mirror.example/debian");
});

Deno.test("broker - readAptSources reads sources.list and sources.list.d in both formats", async () => {
  const dir = await tempDir();
  try {
    await Deno.mkdir(`${dir}/sources.list.d`);
    await Deno.writeTextFile(`${dir}/sources.list`, "# empty\n");
    await Deno.writeTextFile(`${dir}/sources.list.d/debian.sources`, DEB822);
    await Deno.writeTextFile(`${dir}/sources.list.d/vendor.list`, ONE_LINE);
    await Deno.writeTextFile(`${dir}/sources.list.d/old.list.disabled`, "deb http://no/ sid main");
    const all = await readAptSources(dir);
    assert.equal(all.length, 5);
    assert.equal(findDebianMirror(all)?.uri, "http://mirror.example/debian");
    assert.ok(!all.some((s) => s.uri === "http://no/"));
  } finally {
    await removeTempDir(dir);
  }
});

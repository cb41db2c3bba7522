/**
 * Reads the machine's configured Debian mirror from apt's own sources, in both formats apt
 * accepts: one-line `.list` entries and deb822 `.sources` stanzas. Cotal never names a mirror
 * host itself; it uses whatever the operator's apt already trusts.
 */

/** One `deb` source as apt sees it. */
export interface AptSource {
  uri: string;
  suites: string[];
  components: string[];
  signedBy?: string;
}

const DEBIAN_SUITE =
  /^(stable|testing|unstable|oldstable|sid|experimental|buzz|rex|bo|hamm|slink|potato|woody|sarge|etch|lenny|squeeze|wheezy|jessie|stretch|buster|bullseye|bookworm|trixie|forky|duke)(-updates|-backports|-proposed-updates)?$/;

/** Parses one-line `deb [opts] uri suite comp...` entries; `deb-src` and comments are skipped. */
export function parseOneLineSources(text: string): AptSource[] {
  const out: AptSource[] = [];
  for (const raw of text.split("\n")) {
    const line = raw.replace(/#.*$/, "").trim();
    if (!line.startsWith("deb ") && !line.startsWith("deb\t")) continue;
    let rest = line.slice(3).trim();
    let signedBy: string | undefined;
    if (rest.startsWith("[")) {
      const end = rest.indexOf("]");
      if (end < 0) continue;
      for (const opt of rest.slice(1, end).trim().split(/\s+/)) {
        const [k, v] = opt.split("=", 2);
        if (k === "signed-by" && v) signedBy = v;
      }
      rest = rest.slice(end + 1).trim();
    }
    const [uri, suite, ...components] = rest.split(/\s+/);
    if (!uri || !suite) continue;
    out.push({ uri, suites: [suite], components, signedBy });
  }
  return out;
}

/** Parses deb822 stanzas (`Types: deb`, `URIs:`, `Suites:`, `Components:`, `Signed-By:`). */
export function parseDeb822Sources(text: string): AptSource[] {
  const out: AptSource[] = [];
  for (const stanza of text.split(/\n\s*\n/)) {
    const fields = new Map<string, string>();
    let last = "";
    for (const raw of stanza.split("\n")) {
      if (raw.startsWith("#")) continue;
      if (/^\s/.test(raw) && last) {
        // A continuation line: an inline Signed-By key block, for instance.
        fields.set(last, `${fields.get(last)}\n${raw.trim()}`);
        continue;
      }
      const m = raw.match(/^([A-Za-z-]+):\s*(.*)$/);
      if (!m) continue;
      last = m[1].toLowerCase();
      fields.set(last, m[2].trim());
    }
    const types = (fields.get("types") ?? "").split(/\s+/);
    if (!types.includes("deb")) continue;
    if ((fields.get("enabled") ?? "yes").toLowerCase() === "no") continue;
    const suites = (fields.get("suites") ?? "").split(/\s+/).filter(Boolean);
    const components = (fields.get("components") ?? "").split(/\s+/).filter(Boolean);
    const signed = fields.get("signed-by");
    for (const uri of (fields.get("uris") ?? "").split(/\s+/).filter(Boolean)) {
      out.push({
        uri,
        suites,
        components,
        signedBy: signed && !signed.includes("\n") ? signed : undefined,
      });
    }
  }
  return out;
}

/**
 * Picks the Debian archive mirror out of the configured sources: an entry with a Debian suite
 * (not a security or third-party suite) and the `main` component. Returns undefined when none.
 */
export function findDebianMirror(sources: AptSource[]): AptSource | undefined {
  return sources.find((s) =>
    s.components.includes("main") &&
    s.suites.some((suite) => DEBIAN_SUITE.test(suite)) &&
    !s.uri.includes("security")
  );
}

/** Reads every source file apt reads under `etcApt` (default `/etc/apt`). */
export async function readAptSources(etcApt = "/etc/apt"): Promise<AptSource[]> {
  const out: AptSource[] = [];
  const tryRead = async (path: string) => {
    try {
      return await Deno.readTextFile(path);
    } catch {
      return undefined;
    }
  };
  const main = await tryRead(`${etcApt}/sources.list`);
  if (main) out.push(...parseOneLineSources(main));
  try {
    const names: string[] = [];
    for await (const e of Deno.readDir(`${etcApt}/sources.list.d`)) names.push(e.name);
    for (const name of names.sort()) {
      const text = await tryRead(`${etcApt}/sources.list.d/${name}`);
      if (!text) continue;
      if (name.endsWith(".list")) out.push(...parseOneLineSources(text));
      else if (name.endsWith(".sources")) out.push(...parseDeb822Sources(text));
    }
  } catch {
    // No sources.list.d: only the main file counts.
  }
  return out;
}

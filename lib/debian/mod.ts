/**
 * Fetching one binary out of a Debian package from the mirror the machine's apt is already
 * configured with (nats-server for the broker, bwrap for the sandbox), never naming a mirror.
 * @module
 */
export {
  findDebianMirror,
  parseDeb822Sources,
  parseOneLineSources,
  readAptSources,
} from "./apt_sources.ts";
export { fetchDebBinary } from "./deb_fetch.ts";

/**
 * The host's table of open files (`fs.file-max`) is one count for every process, and no cgroup
 * limits an agent's share of it. Descriptors are bounded per process, but a file mapped with
 * `mmap` stays open after its descriptor is closed: red team 39 held 720,000 open files (29 % of
 * this host's table) within a second from an agent limited to 16,384 descriptors, and at that
 * pace one default agent fills the table of any host under ~24 GB. A full table fails every open,
 * socket, pipe and accept of every process that is not root: sibling agents and their runners,
 * the operator's own programs.
 *
 * Each open file is kernel memory charged to the memory cgroup of the process that opened it
 * (~400 bytes, measured), so an agent's memory limit bounds what it holds. What makes the table
 * a shared pool is only its cap. A root supervisor lifts the cap to its maximum, as systemd does
 * at boot on most hosts (since v240): the agents' memory limits are then what bounds them.
 *
 * @module
 */
import { readSmallFile, writeControlFile } from "./libc.ts";

const FILE_MAX = "/proc/sys/fs/file-max";
/** The kernel's largest `fs.file-max` (LONG_MAX): no table-wide cap. */
export const FILE_MAX_UNCAPPED = "9223372036854775807";

/**
 * Lifts `fs.file-max` to {@linkcode FILE_MAX_UNCAPPED} if it is lower; what it did, in one
 * line, or undefined when there was nothing to do. Needs root; says so when it cannot.
 */
export function uncapFileTable(path: string = FILE_MAX): string | undefined {
  const now = readSmallFile(path)?.trim();
  if (now === undefined || !/^\d+$/.test(now)) {
    return `could not read ${path}; the host's open-file table keeps its cap`;
  }
  if (BigInt(now) >= BigInt(FILE_MAX_UNCAPPED)) return undefined;
  try {
    writeControlFile(path, FILE_MAX_UNCAPPED);
  } catch (err) {
    return `could not lift ${path} from ${now} (${(err as Error).message}): an agent that maps ` +
      "files can fill the host's open-file table (set fs.file-max to its maximum, as systemd does)";
  }
  return `lifted fs.file-max from ${now} to its maximum: each agent's open files are bounded by ` +
    "its memory limit, not a table all processes share";
}

#!/usr/bin/env python3
"""Runs a command under the seccomp policy a systemd unit declares, for
hosts where systemd is not PID 1 (containers, CI) and the unit itself
cannot be started.

    unit_seccomp.py UNIT_FILE -- COMMAND [ARGS...]

From the unit's [Service] section it applies, with libseccomp through
ctypes (the libseccomp2 shared library, no Python binding needed):

- SystemCallFilter= (allow list, then ~deny lists, in order, as systemd
  does: an allow list starts from @default), each @group expanded from
  `systemd-analyze syscall-filter`, the host systemd's own tables;
- SystemCallArchitectures=native (only the native ABI is in the filter);
- RestrictAddressFamilies= (socket() of any other family fails with
  EAFNOSUPPORT, as under systemd);
- MemoryDenyWriteExecute= (no W+X mmap, no mprotect/pkey_mprotect to X).

A call outside the filter kills the process with SIGSYS (stricter than the
unit's SystemCallErrorNumber=EPERM: the tests want to see every call the
daemons make outside the policy, not have it fail quietly). The filter is
loaded with no_new_privs and then COMMAND is exec'd, so the daemon's
loader and everything after run under it, as after systemd's exec.
"""
import ctypes
import ctypes.util
import errno
import os
import socket
import subprocess
import sys

SCMP_ACT_KILL_PROCESS = 0x80000000
SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_CMP_EQ = 4
SCMP_CMP_MASKED_EQ = 7
PROT_WRITE, PROT_EXEC = 0x2, 0x4
AF_MAX = 64  # beyond every family the kernel defines (46 in 6.x)


def SCMP_ACT_ERRNO(e):
    return 0x00050000 | (e & 0xFFFF)


class ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int),
                ("datum_a", ctypes.c_uint64), ("datum_b", ctypes.c_uint64)]


def syscall_groups():
    """{"@group": [names and @subgroups]} from systemd-analyze."""
    out = subprocess.run(["systemd-analyze", "syscall-filter"], check=True,
                         capture_output=True, text=True).stdout
    groups, cur = {}, None
    for line in out.splitlines():
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        if not line[0].isspace():
            cur = groups.setdefault(s, [])
        elif cur is not None:
            cur.append(s)
    return groups


def expand(names, groups, seen=None):
    seen = set() if seen is None else seen
    out = set()
    for n in names:
        if n.startswith("@"):
            if n in seen:
                continue
            seen.add(n)
            if n not in groups:
                raise ValueError(f"unknown syscall group {n}")
            out |= expand(groups[n], groups, seen)
        else:
            out.add(n)
    return out


def unit_service_settings(path):
    """[Service] assignments in order: [(key, value)]."""
    items, section = [], None
    for line in open(path):
        s = line.strip()
        if not s or s[0] in "#;":
            continue
        if s.startswith("["):
            section = s
            continue
        if section == "[Service]" and "=" in s:
            k, _, v = s.partition("=")
            items.append((k.strip(), v.strip()))
    return items


def policy(unit):
    """(allowed syscall names, allowed address families or None, mdwe)."""
    groups = syscall_groups()
    allow = None
    families = None
    mdwe = False
    for k, v in unit_service_settings(unit):
        if k == "SystemCallFilter":
            if not v:
                allow = None
                continue
            deny = v.startswith("~")
            names = set(expand(v.lstrip("~").split(), groups))
            if deny:
                if allow is None:
                    raise ValueError("deny-list-only filters are not emulated")
                allow -= names
            else:
                if allow is None:
                    allow = set(expand(["@default"], groups))
                allow |= names
        elif k == "RestrictAddressFamilies":
            if v.startswith("~") or v in ("", "none"):
                raise ValueError(f"RestrictAddressFamilies={v} not emulated")
            families = {getattr(socket, f) for f in v.split()}
        elif k == "MemoryDenyWriteExecute":
            mdwe = v in ("yes", "true", "1", "on")
        elif k == "SystemCallArchitectures" and v != "native":
            raise ValueError(f"SystemCallArchitectures={v} not emulated")
    if allow is None:
        raise ValueError(f"{unit}: no SystemCallFilter=")
    return allow, families, mdwe


def apply(unit):
    allow, families, mdwe = policy(unit)
    lib = ctypes.CDLL(ctypes.util.find_library("seccomp") or "libseccomp.so.2",
                      use_errno=True)
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint,
        ctypes.POINTER(ArgCmp)]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    ctx = lib.seccomp_init(SCMP_ACT_KILL_PROCESS)
    if not ctx:
        raise OSError("seccomp_init failed")

    def rule(action, name, *cmps):
        nr = lib.seccomp_syscall_resolve_name(name.encode())
        if nr < 0:
            return  # not a syscall of this architecture
        arr = (ArgCmp * max(1, len(cmps)))(*cmps)
        rc = lib.seccomp_rule_add_array(ctx, action, nr, len(cmps), arr)
        if rc < 0:
            raise OSError(-rc, f"seccomp rule for {name}: {os.strerror(-rc)}")

    special = {"socket", "mmap", "mprotect", "pkey_mprotect"}
    for name in sorted(allow - special):
        rule(SCMP_ACT_ALLOW, name)
    if "socket" in allow:
        if families is None:
            rule(SCMP_ACT_ALLOW, "socket")
        else:
            for af in range(AF_MAX):
                act = SCMP_ACT_ALLOW if af in families else SCMP_ACT_ERRNO(errno.EAFNOSUPPORT)
                rule(act, "socket", ArgCmp(0, SCMP_CMP_EQ, af, 0))
    wx = PROT_WRITE | PROT_EXEC
    if "mmap" in allow:
        if mdwe:
            for ok in (0, PROT_WRITE, PROT_EXEC):
                rule(SCMP_ACT_ALLOW, "mmap", ArgCmp(2, SCMP_CMP_MASKED_EQ, wx, ok))
        else:
            rule(SCMP_ACT_ALLOW, "mmap")
    for name in ("mprotect", "pkey_mprotect"):
        if name in allow:
            if mdwe:
                rule(SCMP_ACT_ALLOW, name, ArgCmp(2, SCMP_CMP_MASKED_EQ, PROT_EXEC, 0))
            else:
                rule(SCMP_ACT_ALLOW, name)
    rc = lib.seccomp_load(ctx)  # sets no_new_privs first (libseccomp default)
    if rc < 0:
        raise OSError(-rc, f"seccomp_load: {os.strerror(-rc)}")


def main(argv):
    if len(argv) < 4 or argv[2] != "--":
        sys.stderr.write(__doc__)
        return 2
    unit, cmd = argv[1], argv[3:]
    apply(unit)
    os.execv(cmd[0], cmd)


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""An executable as bytes (PJRT_Executable_Serialize) and back (PJRT_Executable_DeserializeAndLoad),
for `jax.experimental.serialize_executable`.

The bytes are a header line, then JSON: the executable plan as the compile cache stores it,
the native object code, the StableHLO program and the compile options it was compiled from
(OptimizedProgram and the cost analysis read them), the devices it is compiled for, its
fingerprint, and the environment that compiled it (versions and host CPU). No pickle. The
object code is native code for that CPU, so it loads only where the environment is the
same: elsewhere the error says which differs. Python callbacks the program calls are
registered in the process that compiled it; elsewhere the program fails when it reaches one.
"""

import base64
import json
from dataclasses import dataclass

from mlirxla.errors import MlirxlaError
from mlirxla.runtime.client import Client, LoadedExecutable, environment
from mlirxla.runtime.executable import Executable, ExecutablePlan

HEADER = b"mlirxla executable 2\n"


@dataclass
class SerializedExecutable:
    executable: LoadedExecutable
    devices: tuple[int, ...]  # by flattened id, replica * partition_count + partition
    program: bytes
    options: bytes


def serialize(serialized: SerializedExecutable) -> bytes:
    inner = serialized.executable.executable
    document = {
        "environment": environment(serialized.executable.client.backend),
        "fingerprint": serialized.executable.fingerprint,
        "devices": list(serialized.devices),
        "plan": inner.plan.to_json(),
        "object_code": encode(inner.object_code),
        "program": encode(serialized.program),
        "options": encode(serialized.options),
    }
    return HEADER + json.dumps(document).encode()


def deserialize(client: Client, data: bytes) -> SerializedExecutable:
    if not data.startswith(HEADER):
        raise MlirxlaError("the serialized executable is not one mlirxla wrote (or another version of its format)")
    try:
        document = json.loads(data[len(HEADER):])
        compiled_by = document["environment"]
        plan = ExecutablePlan.from_json(document["plan"])
        object_code, program, options = (decode(document[key]) for key in ("object_code", "program", "options"))
        fingerprint, devices = str(document["fingerprint"]), tuple(int(device) for device in document["devices"])
    except (ValueError, KeyError, TypeError, IndexError) as error:
        raise MlirxlaError(f"the serialized executable is damaged: {type(error).__name__}: {error}") from None
    here = environment(client.backend)
    if compiled_by != here:
        raise MlirxlaError(f"the serialized executable was compiled elsewhere: {environment_difference(compiled_by, here)}")
    loaded = LoadedExecutable(Executable(plan, object_code), client, fingerprint)
    return SerializedExecutable(loaded, devices, program, options)


def environment_difference(compiled_by: str, here: str) -> str:
    """The parts of two environments (`name=value;...`) that differ, as 'name: there vs here'."""
    def parts(text: str) -> dict[str, str]:
        return dict(part.split("=", 1) for part in str(text).split(";") if "=" in part)

    there, local = parts(compiled_by), parts(here)
    return ", ".join(f"{name} {there.get(name, '(none)')} there, {local.get(name, '(none)')} here"
                     for name in sorted(set(there) | set(local)) if there.get(name) != local.get(name))


def encode(data: bytes) -> str:
    return base64.b64encode(data).decode()


def decode(text: str) -> bytes:
    return base64.b64decode(text, validate=True)

"""Type stubs of the flashpipe package."""

import io
from typing import Any, Dict, Iterator, List, Literal, Optional, Union

import numpy
import numpy.typing

from ._errors import (
    Busy as Busy,
    Closed as Closed,
    ConnectionLost as ConnectionLost,
    Corrupt as Corrupt,
    Error as Error,
    Exists as Exists,
    Internal as Internal,
    Invalid as Invalid,
    KernelFailed as KernelFailed,
    IoError as IoError,
    NoSpace as NoSpace,
    NotFound as NotFound,
    PermissionDenied as PermissionDenied,
)
from ._file import StoreFile as StoreFile
from ._flashpipe import KernelRunStream as KernelRunStream, ReadBuffer as ReadBuffer, __version__ as __version__
from ._flashpipe import Store as _NativeStore

BUFFER_SIZE_BYTES: int

class KernelRun(Iterator[Dict[str, Any]]):
    def __next__(self) -> Dict[str, Any]: ...
    @property
    def summary(self) -> Optional[Dict[str, Any]]: ...
    def close(self) -> None: ...
    def __enter__(self) -> "KernelRun": ...
    def __exit__(self, *exc: object) -> bool: ...

class Store(_NativeStore):
    def __enter__(self) -> "Store": ...
    def open(
        self, name: str, mode: Literal["rb", "wb"] = ..., buffering: int = ...
    ) -> Union[StoreFile, io.BufferedReader, io.BufferedWriter]: ...
    def run(
        self,
        kernel: str,
        names: Union[str, List[str]],
        *,
        output: Optional[str] = ...,
        replace: bool = ...,
        **options: Any,
    ) -> KernelRun: ...
    def read_buffer(self, name: str, offset: int = ..., length: int = ...) -> memoryview: ...
    def read_array(
        self,
        name: str,
        dtype: numpy.typing.DTypeLike = ...,
        offset: int = ...,
        count: int = ...,
    ) -> numpy.ndarray[Any, Any]: ...

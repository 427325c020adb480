import io
from typing import Any, Literal

class StoreFile(io.RawIOBase):
    name: str
    mode: Literal["rb", "wb"]
    def __init__(self, store: Any, name: str, mode: Literal["rb", "wb"]) -> None: ...

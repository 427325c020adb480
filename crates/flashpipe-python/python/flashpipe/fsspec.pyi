from typing import Any, Dict, List, Optional, Union

from fsspec.spec import AbstractFileSystem

from . import Store

STORE_VARIABLE: str

class FlashpipeFileSystem(AbstractFileSystem):
    store_path: str
    store: Store
    def __init__(self, store: Optional[str] = ..., read_only: bool = ..., **kwargs: Any) -> None: ...
    def ls(self, path: str, detail: bool = ..., **kwargs: Any) -> Union[List[Dict[str, Any]], List[str]]: ...
    def info(self, path: str, **kwargs: Any) -> Dict[str, Any]: ...

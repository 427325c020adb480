from os import PathLike
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple, Union

from . import Store

PLACEMENTS: Tuple[str, str]

class DatasetFile:
    store: str
    worker: str
    name: str
    def __init__(self, store: Union[str, PathLike[str]], worker: str, name: str) -> None: ...

class Dataset:
    files: Tuple[DatasetFile, ...]
    def __init__(self, files: Iterable[Union[DatasetFile, Tuple[str, str, str]]]) -> None: ...
    @classmethod
    def from_stores(
        cls, stores: Mapping[Union[str, PathLike[str]], str], pattern: str = ..., client: Optional[Any] = ...
    ) -> "Dataset": ...
    @property
    def workers(self) -> List[str]: ...
    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[DatasetFile]: ...

class MapResult:
    results: List[Any]
    report: Dict[str, Any]

def map(
    dataset: Dataset,
    func: Union[str, Callable[..., Any]],
    *,
    client: Optional[Any] = ...,
    placement: str = ...,
    **options: Any,
) -> MapResult: ...

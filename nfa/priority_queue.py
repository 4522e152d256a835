"""A binary-heap priority queue with java.util.PriorityQueue's exact behaviour.

FlinkCEP keeps partial and completed matches in Java priority queues and walks
them in *array* order; when two matches tie on the comparator, which one comes
out first depends on the heap's layout.  Reproducing that layout operation by
operation is what makes our output order equal Flink's, ties included.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")
K = TypeVar("K")


class PriorityQueue(Generic[T]):
    """Min-heap ordered by ``key(item)``; iteration is in array order, as in Java."""

    __slots__ = ("_items", "_key")

    def __init__(self, key: Callable[[T], object]) -> None:
        self._items: list[T] = []
        self._key = key

    def __len__(self) -> int:
        return len(self._items)

    def __bool__(self) -> bool:
        return bool(self._items)

    def __iter__(self) -> Iterator[T]:
        return iter(list(self._items))

    def peek(self) -> T | None:
        return self._items[0] if self._items else None

    def add(self, item: T) -> None:
        items = self._items
        key = self._key
        k = len(items)
        items.append(item)
        kx = key(item)
        while k > 0:
            parent = (k - 1) >> 1
            e = items[parent]
            if not kx < key(e):  # Java: stop when compare(x, e) >= 0
                break
            items[k] = e
            k = parent
        items[k] = item

    def add_all(self, items: Iterable[T]) -> None:
        for item in items:
            self.add(item)

    def poll(self) -> T | None:
        items = self._items
        if not items:
            return None
        result = items[0]
        last = items.pop()
        if items:
            self._sift_down(0, last, len(items))
        return result

    def remove_where(self, predicate: Callable[[T], bool]) -> None:
        """Java's bulk removal (removeAll / removeIf): keep survivors in order, then heapify."""
        survivors = [x for x in self._items if not predicate(x)]
        if len(survivors) == len(self._items):
            return
        self._items = survivors
        n = len(survivors)
        for i in range((n >> 1) - 1, -1, -1):
            self._sift_down(i, survivors[i], n)

    def heap(self) -> list[T]:
        """The items in heap order (a copy): with :meth:`from_heap`, a snapshot that keeps
        the order Java's PriorityQueue would iterate in."""
        return list(self._items)

    @staticmethod
    def from_heap(key: Callable[[T], object], items: list[T]) -> PriorityQueue[T]:
        """A queue holding ``items`` exactly as :meth:`heap` gave them."""
        queue: PriorityQueue[T] = PriorityQueue(key)
        queue._items = list(items)
        return queue

    def _sift_down(self, k: int, x: T, n: int) -> None:
        items = self._items
        key = self._key
        kx = key(x)
        half = n >> 1
        while k < half:
            child = 2 * k + 1
            c = items[child]
            right = child + 1
            if right < n and key(items[right]) < key(c):  # Java: compare(c, right) > 0
                child = right
                c = items[child]
            if not key(c) < kx:  # Java: stop when compare(x, c) <= 0
                break
            items[k] = c
            k = child
        items[k] = x

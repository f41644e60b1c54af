"""A Qdrant server (HINDSIGHT_QDRANT__URL) through qdrant-client: one collection of card points."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import httpx
from qdrant_client import QdrantClient, models
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from memory_core.errors import IndexUnavailable, InvalidInput
from memory_core.index.base import KIND, NAMESPACE, IndexPoint

SCROLL_PAGE = 10_000
_UNREACHABLE = (ResponseHandlingException, UnexpectedResponse, httpx.HTTPError, OSError)


class ServerIndex:
    """A VectorIndex on a Qdrant collection; any client works (server URL, or local mode)."""

    def __init__(
        self, *, client: QdrantClient, collection: str, dim: int, recreate: bool = False
    ) -> None:
        if dim < 1:
            raise InvalidInput(f"vector dimension must be positive, got {dim}", field="dim")
        self.dim = dim
        self.collection = collection
        self._client = client
        try:
            exists = client.collection_exists(collection)
            if exists and recreate:
                client.delete_collection(collection)
                exists = False
            if exists:
                self._check_dim()
            else:
                client.create_collection(
                    collection,
                    vectors_config=models.VectorParams(size=dim, distance=models.Distance.COSINE),
                )
                for key in (NAMESPACE, KIND):
                    client.create_payload_index(
                        collection, key, field_schema=models.PayloadSchemaType.KEYWORD
                    )
        except _UNREACHABLE as exc:
            raise IndexUnavailable(f"Qdrant collection {collection!r}: {exc}") from exc

    @classmethod
    def connect(
        cls, *, url: str, api_key: str | None, collection: str, dim: int, recreate: bool = False
    ) -> ServerIndex:
        """Connect to a Qdrant server and open (or create) the collection."""
        client = QdrantClient(url=url, api_key=api_key, timeout=30)
        return cls(client=client, collection=collection, dim=dim, recreate=recreate)

    def _check_dim(self) -> None:
        params = self._client.get_collection(self.collection).config.params.vectors
        if not isinstance(params, models.VectorParams):
            raise IndexUnavailable(
                f"Qdrant collection {self.collection!r} has named vectors; expected one "
                "unnamed vector (use another HINDSIGHT_QDRANT__COLLECTION)"
            )
        if params.size != self.dim or params.distance != models.Distance.COSINE:
            raise IndexUnavailable(
                f"Qdrant collection {self.collection!r} holds {params.size}-d "
                f"{params.distance.value} vectors, the embedder makes {self.dim}-d Cosine ones; "
                "rebuild it with `hindsight index rebuild --recreate`"
            )

    def upsert(self, points: Sequence[IndexPoint]) -> None:
        """Insert or overwrite points; the point id is the card id."""
        if not points:
            return
        structs = []
        for p in points:
            vec = [float(x) for x in p.vector]
            if len(vec) != self.dim:
                raise InvalidInput(
                    f"vector of {len(vec)} dimensions, the index holds {self.dim}",
                    record=str(p.card_id),
                    field="vector",
                )
            structs.append(models.PointStruct(id=str(p.card_id), vector=vec, payload=p.payload()))
        self._client.upsert(self.collection, points=structs, wait=True)

    def delete(self, card_ids: Sequence[uuid.UUID]) -> None:
        """Remove points by card id (unknown ids are ignored)."""
        if card_ids:
            self._client.delete(
                self.collection,
                points_selector=models.PointIdsList(points=[str(c) for c in card_ids]),
                wait=True,
            )

    def search(
        self, *, vector: Sequence[float], namespace: str, kind: str | None = None, limit: int = 10
    ) -> list[tuple[uuid.UUID, float]]:
        """Nearest cards by cosine similarity, filtered by the server."""
        vec = [float(x) for x in vector]
        if len(vec) != self.dim:
            raise InvalidInput(f"query of {len(vec)} dimensions, the index holds {self.dim}")
        if limit < 1:
            return []
        res = self._client.query_points(
            self.collection,
            query=vec,
            query_filter=_filter(namespace, kind),
            limit=limit,
            with_payload=False,
            with_vectors=False,
        )
        return [(uuid.UUID(str(p.id)), float(p.score)) for p in res.points]

    def ids(self, *, namespace: str | None = None) -> set[uuid.UUID]:
        """Every point id, paging through the collection."""
        out: set[uuid.UUID] = set()
        flt = None if namespace is None else _filter(namespace, None)
        offset: models.ExtendedPointId | None = None
        while True:
            records, offset = self._client.scroll(
                self.collection,
                scroll_filter=flt,
                limit=SCROLL_PAGE,
                offset=offset,
                with_payload=False,
                with_vectors=False,
            )
            out.update(uuid.UUID(str(r.id)) for r in records)
            if offset is None:
                return out

    def close(self) -> None:
        """Close the client connection."""
        self._client.close()


def _filter(namespace: str, kind: str | None) -> models.Filter:
    must: list[models.Condition] = [
        models.FieldCondition(key=NAMESPACE, match=models.MatchValue(value=namespace))
    ]
    if kind is not None:
        must.append(models.FieldCondition(key=KIND, match=models.MatchValue(value=kind)))
    return models.Filter(must=must)

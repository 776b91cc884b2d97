"""Elasticsearch's BM25 on Lucene, in a process of its own (the caller's never starts a JVM): what IFIR's authors
ran (SighingSnow/IFIR ``src/utils/constant.py`` ``get_es``: langchain's ``ElasticsearchStore`` with
``BM25RetrievalStrategy`` on Elasticsearch 8.11), done with the Lucene classes Elasticsearch itself calls:

- the ``text`` field is analyzed by the ``standard`` analyzer: Lucene's ``StandardAnalyzer`` without stop words
  (Elasticsearch's default, ``_stopwords: _none_``);
- one shard, so the collection statistics are the whole index's;
- a ``match`` query is Lucene's ``QueryBuilder.createBooleanQuery`` over the analyzed text (a ``SHOULD`` clause per
  token: Elasticsearch's ``MatchQueryParser`` extends that builder);
- scores are Elasticsearch's ``LegacyBM25Similarity`` (``SimilarityProviders.createBM25Similarity``, k1 1.2, b 0.75):
  Lucene's ``BM25Similarity`` scorer given the boost ``1 + k1``, here as a ``BoostQuery`` of that float.

    python -m instir.retrieval.lucene_jvm index COLLECTION.jsonl INDEX_FOLDER
    python -m instir.retrieval.lucene_jvm search INDEX_FOLDER TOPICS.tsv RUN.tsv K1 B HITS

``JAVA_HOME`` and ``INSTIR_ANSERINI_JAR`` (the jar holding Lucene) come from the caller
(:class:`instir.retrieval.lucene.ElasticsearchBM25Retriever`). Output: ``qid<TAB>docid<TAB>score`` in Lucene's order.
"""

from __future__ import annotations

import json
import os
import sys

from instir import atomic


def _classes():
    """Lucene's classes, from the jar the caller names (the class path must be set before the JVM starts)."""
    import jnius_config

    jnius_config.set_classpath(os.environ["INSTIR_ANSERINI_JAR"])
    from jnius import autoclass

    return autoclass


def _analyzer(autoclass):
    return autoclass("org.apache.lucene.analysis.standard.StandardAnalyzer")(
        autoclass("org.apache.lucene.analysis.CharArraySet").EMPTY_SET)


def index(collection: str, folder: str) -> None:
    """Index the ``{"id", "contents"}`` lines of ``collection`` into ``folder`` (one segment)."""
    autoclass = _classes()
    config = autoclass("org.apache.lucene.index.IndexWriterConfig")(_analyzer(autoclass))
    config.setSimilarity(autoclass("org.apache.lucene.search.similarities.BM25Similarity")())
    paths = autoclass("java.nio.file.Paths")
    writer = autoclass("org.apache.lucene.index.IndexWriter")(
        autoclass("org.apache.lucene.store.FSDirectory").open(paths.get(folder)), config)
    document = autoclass("org.apache.lucene.document.Document")
    string_field = autoclass("org.apache.lucene.document.StringField")
    text_field = autoclass("org.apache.lucene.document.TextField")
    store = autoclass("org.apache.lucene.document.Field$Store")
    with open(collection, encoding="utf-8") as fh:
        for line in fh:
            record = json.loads(line)
            doc = document()
            doc.add(string_field("id", record["id"], store.YES))
            doc.add(text_field("text", record["contents"], store.NO))
            writer.addDocument(doc)
    writer.forceMerge(1)
    writer.close()


def search(folder: str, topics: str, out: str, k1: str, b: str, hits: str) -> None:
    """The ``match`` query of each ``qid<TAB>text`` line of ``topics``, its top ``hits`` written to ``out``."""
    autoclass = _classes()
    paths = autoclass("java.nio.file.Paths")
    reader = autoclass("org.apache.lucene.index.DirectoryReader").open(
        autoclass("org.apache.lucene.store.FSDirectory").open(paths.get(folder)))
    from jnius import cast

    searcher = autoclass("org.apache.lucene.search.IndexSearcher")(cast("org.apache.lucene.index.IndexReader", reader))
    searcher.setSimilarity(autoclass("org.apache.lucene.search.similarities.BM25Similarity")(float(k1), float(b)))
    builder = autoclass("org.apache.lucene.util.QueryBuilder")(_analyzer(autoclass))
    boost = autoclass("org.apache.lucene.search.BoostQuery")
    legacy = 1.0 + float(k1)  # LegacyBM25Similarity: the scorer's boost times (1 + k1), in float
    stored = reader.storedFields()
    lines = []
    with open(topics, encoding="utf-8") as fh:
        for line in fh:
            qid, _, text = line.rstrip("\n").partition("\t")
            query = builder.createBooleanQuery("text", text)
            if query is None:  # no token survives analysis: Elasticsearch matches nothing
                continue
            for hit in searcher.search(boost(query, legacy), int(hits)).scoreDocs:
                lines.append(f"{qid}\t{stored.document(hit.doc).get('id')}\t{hit.score!r}\n")
    reader.close()
    atomic.write_text(out, "".join(lines))


if __name__ == "__main__":
    {"index": index, "search": search}[sys.argv[1]](*sys.argv[2:])

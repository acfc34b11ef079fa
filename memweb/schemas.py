"""Request bodies that take what they say and nothing else.

pydantic's lax mode turns `k: true` into 1 and `success: "yes"` into True, and ignores unknown
fields (a misspelt `kk` falls back to the default silently). A body model inheriting StrictBody
refuses both with a 422 naming the field. Only scalar fields (bool, int, float and their optional
forms) are made strict: enums, dates and UUIDs still arrive as JSON strings and must be parsed.
"""
import types
import typing

from pydantic import BaseModel, ConfigDict, Strict

_STRICT_SCALARS = (bool, int, float)


def _is_scalar(annotation) -> bool:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        inner = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        return len(inner) == 1 and inner[0] in _STRICT_SCALARS
    return annotation in _STRICT_SCALARS


class StrictBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs):
        super().__pydantic_init_subclass__(**kwargs)
        loose = [field for field in cls.model_fields.values()
                 if _is_scalar(field.annotation) and not any(isinstance(m, Strict) for m in field.metadata)]
        for field in loose:
            field.metadata.append(Strict())
        if loose:
            cls.model_rebuild(force=True)

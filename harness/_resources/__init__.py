"""Resources: skills (progressive disclosure, scopes, providers, write verdicts), prompt
templates and context files. ``AgentHarness`` wires these; the logic lives here.

Modules: ``records`` (values), ``frontmatter``, ``locations`` (where to look), ``discovery``
(skills on disk), ``providers``, ``catalog`` (precedence and the model's catalog), ``journal``
(what the session records), ``skill_tool``, ``templates``, ``context_files``,
``system_prompt``, ``verdict`` (who may write), ``manager`` (``Resources``), ``nested``
(``run_skill``), ``errors``.
"""

from .catalog import DEFAULT_MAX_SKILLS, CatalogEntry, SkillOffer, catalog_block
from .context_files import ContextFile
from .discovery import ReadCheck, SkillRoot
from .errors import (
    SkillDisabledError,
    SkillNotFoundError,
    SkillWriteRefusedError,
    TemplateNotFoundError,
)
from .journal import SKILL_BODY_TYPE, SKILL_CATALOG_TYPE, SKILL_RUN_TYPE, SkillJournal
from .manager import (
    RefreshReport,
    ResourceOptions,
    Resources,
    SkillBuildResult,
    SkillListing,
    default_scopes,
)
from .nested import SkillRunResult, default_child_repo, run_skill
from .providers import (
    CompositeSkillProvider,
    FileSystemSkillProvider,
    RefreshableSkillProvider,
    ScopeResolver,
    SkillContext,
    SkillProvider,
    StaticSkillProvider,
)
from .records import (
    DEFAULT_SCOPES,
    EXTRA_SCOPE,
    INTERNAL_SCOPE,
    PROJECT_SCOPE,
    USER_SCOPE,
    ResourceDiagnostic,
    Skill,
    SkillRecord,
    SkillSummary,
)
from .skill_tool import SKILL_TOOL_NAME, serve_skill, skill_tool
from .system_prompt import PromptParts, SystemPromptBuilder, compose_system_prompt
from .templates import PromptTemplate, expand_template, parse_args, split_command
from .verdict import SkillWriteRequest, SkillWriteVerdict, skill_write_verdict

__all__ = [
    "DEFAULT_MAX_SKILLS",
    "DEFAULT_SCOPES",
    "EXTRA_SCOPE",
    "INTERNAL_SCOPE",
    "PROJECT_SCOPE",
    "SKILL_BODY_TYPE",
    "SKILL_CATALOG_TYPE",
    "SKILL_RUN_TYPE",
    "SKILL_TOOL_NAME",
    "USER_SCOPE",
    "CatalogEntry",
    "CompositeSkillProvider",
    "ContextFile",
    "FileSystemSkillProvider",
    "PromptParts",
    "PromptTemplate",
    "ReadCheck",
    "RefreshReport",
    "RefreshableSkillProvider",
    "ResourceDiagnostic",
    "ResourceOptions",
    "Resources",
    "ScopeResolver",
    "Skill",
    "SkillBuildResult",
    "SkillContext",
    "SkillDisabledError",
    "SkillJournal",
    "SkillListing",
    "SkillNotFoundError",
    "SkillOffer",
    "SkillProvider",
    "SkillRecord",
    "SkillRoot",
    "SkillRunResult",
    "SkillSummary",
    "SkillWriteRefusedError",
    "SkillWriteRequest",
    "SkillWriteVerdict",
    "StaticSkillProvider",
    "SystemPromptBuilder",
    "TemplateNotFoundError",
    "catalog_block",
    "compose_system_prompt",
    "default_child_repo",
    "default_scopes",
    "expand_template",
    "parse_args",
    "run_skill",
    "serve_skill",
    "skill_tool",
    "skill_write_verdict",
    "split_command",
]

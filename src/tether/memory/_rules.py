"""The scan's rules: what an injection says, in the languages tether's users write.

Rules on the ``words`` view are written as plain lower-case phrases with regular-expression
alternation; :func:`_phrase` lets a space match any gap (or none, for letters spaced out) and an
``l`` match ``i`` too (leetspeak writes both as ``1``). Rules on ``latin`` keep punctuation
(commands, markup); rules on ``plain`` keep non-Latin scripts (Russian, Chinese, Japanese).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tether.memory.scan import Views

# Look-alikes that Unicode's confusables table does not map to a Latin letter.
EXTRA_LOOKALIKES = {
    "ε": "e",
    "κ": "k",
    "τ": "t",
    "т": "t",
    "н": "h",
    "м": "m",
    "в": "b",
    "к": "k",
    "ѕ": "s",
    "ј": "j",
    "ԁ": "d",
    "ɡ": "g",
    "ı": "i",
    "ℓ": "l",
    "η": "n",
    "υ": "u",
}


def _phrase(source: str) -> str:
    out = []
    i = 0
    in_class = False
    while i < len(source):
        ch = source[i]
        if ch == "\\":
            out.append(source[i : i + 2])
            i += 2
            continue
        if ch == "[":
            in_class = True
        elif ch == "]":
            in_class = False
        if not in_class and ch == " ":
            out.append(r"\s*")
        elif not in_class and ch == "l":
            out.append("[li]")
        else:
            out.append(ch)
        i += 1
    return "".join(out)


@dataclass
class Rule:
    family: str
    reason: str
    words: Sequence[str] = ()  # phrases on the words view (also tried squeezed together)
    latin: Sequence[str] = ()  # regexes on the latin view
    plain: Sequence[str] = ()  # regexes on the plain view
    _compiled: list[tuple[str, re.Pattern[str]]] = field(default_factory=list, repr=False)

    def compile(self) -> None:
        for p in self.words:
            body = _phrase(p)
            self._compiled.append(("words", re.compile(r"\b(?:" + body + ")")))
            squeezed = re.sub(r"\(\?:\\w\+\\s\+\)\{0,(\d+)\}\?", lambda m: r"\w{0,16}?", body)
            self._compiled.append(("compact", re.compile(squeezed.replace(r"\s*", "(?:)").replace(r"\b", ""))))
        self._compiled += [(view, re.compile(p, re.M)) for p in self.latin for view in ("latin", "leet")]
        self._compiled += [("plain", re.compile(p, re.M)) for p in self.plain]

    def match(self, v: Views) -> str | None:
        for view, pattern in self._compiled:
            m = pattern.search(getattr(v, view))
            if m:
                return m.group(0)
        return None


# -- shared vocabulary (words view: no accents, lower case) ---------------------------------

_ANY = r"(?:\w+\s+){0,4}?"  # a few words of any kind
_EN_IGNORE = (
    r"(?:ignore|ignoring|disregard|disregarding|forget|forgetting|overrid(?:e|ing)|overrule|bypass|"
    r"circumvent|disobey|unlearn|nullify|void|abandon|dismiss|neglect|discard|scrap|ditch|"
    r"set aside|put aside|throw out|throw away|stop following|stop obeying|stop applying|"
    r"no longer follow|no longer obey|dont follow|do not follow|dont obey|do not obey|"
    r"pay no (?:attention|heed|mind) to)"
)
_EN_WEAK_VERB = r"(?:skip|drop|cancel|erase|wipe|delete|clear|suspend|lift|remove|toss|reset|ditch)"
_EN_STRONG = (
    r"(?:instructions?|instructed|directions|directives?|guidelines?|guidance|prompts?|programming|"
    r"guardrails?|safeguards?|system message|conditioning|ethics|principles|core rules|safety rules|"
    r"safety settings|safety measures|content polic(?:y|ies))"
)
_EN_RULES = (
    rf"(?:{_EN_STRONG}|rules?|constraints?|restrictions?|limitations?|limits|polic(?:y|ies)|orders?|"
    r"commands?|filters?|boundaries|setup|configuration|briefing|training)"
)
_EN_BEFORE = (
    r"(?:previous|previously|prior|preceding|above|earlier|before|original|initial|old|existing|"
    r"current|given|system|developer|default|safety|first|that came before|you were given|"
    r"you have been given|you received|you got)"
)

_ES_RULES = (
    r"(?:instrucciones|indicaciones|reglas|directrices|ordenes|normas|restricciones|pautas|consignas|"
    r"limitaciones)"
)
_FR_RULES = r"(?:instructions|consignes|regles|directives|ordres|restrictions|indications|limites|limitations)"
_DE_RULES = (
    r"(?:anweisungen|instruktionen|regeln|vorgaben|richtlinien|befehle|anordnungen|einschrankungen|"
    r"beschrankungen|systemanweisungen|vorschriften)"
)
_PT_RULES = r"(?:instrucoes|regras|diretrizes|orientacoes|ordens|restricoes|normas|limitacoes|diretivas)"
_IT_RULES = r"(?:istruzioni|regole|direttive|indicazioni|ordini|restrizioni|linee guida|limitazioni)"
_NL_RULES = r"(?:instructies|regels|richtlijnen|aanwijzingen|beperkingen|opdrachten)"

_RU_IGNORE = (
    r"(?:игнорируй|игнорируйте|игнорировать|проигнорируй|проигнорируйте|забудь|забудьте|забыть|"
    r"отбрось|отбросьте|отмени|отмените|не обращай внимания на|не обращайте внимания на|не следуй|"
    r"не следуйте|не выполняй|не выполняйте|пренебреги|пренебрегите|перестань следовать|"
    r"перестаньте следовать|сбрось|сбросьте|обойди|обойдите|удали|отключи|отключите)"
)
_RU_RULES = (
    r"(?:инструкци\w*|указани\w*|правил\w*|ограничени\w*|директив\w*|команд\w*|установк\w*|"
    r"настройк\w*|запрет\w*|предписани\w*|фильтр\w*)"
)
_ZH_RULES = r"(?:指令|指示|说明|規則|规则|提示|设定|設定|要求|限制|约束|命令|准则|守则|规定|政策)"
_JA_RULES = r"(?:指示|命令|ルール|指令|設定|制約|制限|ガイドライン|規則|プロンプト)"

_URL = r"(?:https?://|www\.|\b[a-z0-9-]+\.(?:com|net|org|io|ru|cn|xyz|top|site|info|biz|co|me|sh|cc|tk)\b)"
_SECRET_FILE = (
    r"(?:\.env\b|\.netrc|_netrc|id_(?:rsa|dsa|ecdsa|ed25519)|\.ssh/|\.aws/(?:credentials|config)|"
    r"\.git-credentials|\.npmrc|\.pypirc|\.pgpass|/etc/(?:shadow|passwd)|\.docker/config\.json|"
    r"\.kube/config|credentials\.json|\.bash_history|keychain|wallet\.dat|\.gnupg)"
)
_SECRET_VAR = r"\$\{?(?:[a-z_][a-z0-9_]*)?(?:key|token|secret|passw(?:or)?d|pwd|cred\w*|auth\w*)\b\}?"
_SECRETS_EN = (
    r"(?:api ?keys?|apikeys?|secret keys?|secrets?|passwords?|passwd|credentials?|access tokens?|"
    r"auth(?:entication)? tokens?|bearer tokens?|session tokens?|tokens? and (?:keys|secrets)|"
    r"private keys?|ssh keys?|env(?:ironment)? (?:vars?|variables|file)|dotenv|cookies?|"
    r"session cookies?|seed phrase|recovery phrase|2fa codes?|otp codes?|card numbers?)"
)

RULES: list[Rule] = [
    Rule(
        "override",
        "it tells the assistant to ignore or replace its instructions",
        words=[
            # English: verb + a few words + (earlier) rules, and the rules + "no longer apply"
            rf"{_EN_IGNORE} {_ANY}{_EN_BEFORE} {_ANY}{_EN_RULES}",
            rf"{_EN_IGNORE} (?:all|any|every|each|your|the|of|these|those|my) {_ANY}{_EN_STRONG}",
            rf"{_EN_IGNORE} (?:all (?:of )?)?your {_ANY}{_EN_RULES}",
            rf"{_EN_WEAK_VERB} (?:all |any |of )*(?:your|the|these|those) (?:previous|prior|preceding|above|earlier|"
            rf"original|initial|system|developer|safety|existing) {_ANY}{_EN_STRONG}",
            rf"{_EN_IGNORE} (?:everything|anything|all) (?:\w+\s+){{0,3}}?(?:above|before|prior|previously|earlier|"
            r"you were (?:told|given)|i told you|else you were told|that came before)",
            rf"{_EN_IGNORE} (?:what|whatever) (?:you were|you have been|you've been|they) "
            r"(?:told|instructed|given|programmed)",
            rf"(?:{_EN_RULES}|everything|anything|all|whatever) (?:\w+\s+){{0,6}}?(?:no longer|dont|do not|does not|doesnt|"
            r"are not|arent|is not|isnt|have stopped|stopped|cease to|ceased to|wont|will not|shall not|should not|"
            r"now) (?:appl(?:y|ies|ied)|valid|matters?|count|binding|bind you|in effect|in force|active|relevant|"
            r"be followed|need to be followed|override|take precedence)",
            r"(?:treat|consider|regard|mark|deem|count) (?:everything|anything|all|the|your|any|whatever|each) "
            r"(?:\w+\s+){0,6}?(?:as )?(?:void|null|invalid|obsolete|cancel?led|revoked|superseded|irrelevant|"
            r"outdated|expired|fake|fiction|a test|a joke|suggestions?|optional|non binding|nonbinding)",
            r"(?:supersedes?|overrides?|replaces?|takes? precedence over|outranks?|trumps?|cancels?|voids?|"
            rf"invalidates?|revokes?|annuls?|nullifies?) (?:all|any|every|the|your|previous|prior|other|earlier|"
            rf"existing|original|system|default|these|those|my) {_ANY}{_EN_RULES}",
            rf"(?:new|updated|revised|real|true|actual|secret|hidden|override|replacement|corrected) {_EN_RULES} "
            r"(?:are|is|follow|below|as follows|from now|take|replace|supersede|override|effective)",
            r"(?:your|the) (?:real|true|actual|rightful|new|original|only) (?:operator|admin|administrator|owner|"
            r"developer|developers|creator|creators|master|boss|principal|controller|handler|user|manager) "
            r"(?:says|said|wants|instructs|instructed|orders|ordered|requires|required|has authori[sz]ed|"
            r"authori[sz]es|told|tells|asks|decided|demands|is me|is now)",
            r"(?:from now on|from this point on|from here on|henceforth|going forward|for the rest of (?:this|the) "
            r"(?:session|conversation)|starting now)(?:\s+\w+){0,4} (?:ignore|disregard|forget|override|bypass|"
            r"no longer follow|stop following) ",
            r"(?:the|all) (?:above|previous|preceding|prior|earlier) (?:\w+\s+){0,3}?(?:was|were|is|are) (?:only |just |"
            r"merely )?(?:a test|a drill|fake|fictional|not real|a joke|a mistake|wrong|invalid|void|obsolete|outdated)",
            r"(?:instead of|rather than) (?:what|the instructions|the rules|whatever) (?:you were|you have been|"
            r"you've been) (?:told|given|instructed)",
            r"(?:obey|follow|comply with|listen to) (?:only )?(?:me|my (?:orders|commands|instructions)|this note|"
            r"these notes|this entry|the instructions in this note)(?: only)? (?:from now|and not|not|instead|rather)",
            r"(?:do not|dont|never) (?:follow|obey|listen to|comply with|apply) (?:your|the|any|those|these) "
            rf"{_ANY}(?:{_EN_RULES}|system prompt|developer message|safety)",
            r"(?:reset|wipe|clear|erase) (?:your|the) (?:memory|context|instructions|rules|programming|conditioning|"
            r"persona|personality|guidelines)",
            # Spanish
            rf"(?:ignora|ignore|ignorad|ignoren|ignorar|olvida|olvide|olvidad|olviden|olvidar|omite|omita|descarta|"
            rf"descarte|desobedece|desobedezca|haz caso omiso (?:a|de)|no (?:sigas|siga|hagas caso a|obedezcas|"
            rf"cumplas|respetes|tengas en cuenta)|salta(?:te)?|anula|anule|deja de (?:seguir|lado|aplicar)|"
            rf"elimina|prescinde de) {_ANY}{_ES_RULES}",
            rf"{_ES_RULES} (?:\w+\s+){{0,5}}?(?:ya no (?:son validas|aplican|se aplican|valen|cuentan|rigen|importan|"
            rf"estan vigentes|tienen validez)|quedan (?:anuladas|sin efecto|derogadas|revocadas)|han sido "
            rf"(?:anuladas|revocadas|reemplazadas|sustituidas)|no (?:aplican|cuentan|valen))",
            r"(?:trata|considera|toma) (?:todo|todas|lo) (?:\w+\s+){0,4}?(?:como )?(?:nulo|nulas|invalido|invalidas|"
            r"sin efecto|obsoleto|obsoletas|una prueba|falso|falsas|sugerencias)",
            r"(?:tu|su) (?:verdadero|autentico|real|nuevo) (?:operador|administrador|dueno|creador|jefe|desarrollador) "
            r"(?:dice|quiere|ordena|exige|ha autorizado|autoriza|manda)",
            rf"(?:nuevas|verdaderas|autenticas) {_ES_RULES}",
            # French
            rf"(?:ignore|ignorez|ignorer|ignores|oublie|oubliez|oublier|fais abstraction (?:de|des)|faites abstraction "
            rf"(?:de|des)|ne tiens (?:pas|plus) compte|ne tenez (?:pas|plus) compte|ne respecte plus|ne respectez plus|"
            rf"ne suis plus|ne suivez plus|laisse tomber|laissez tomber|ecarte|ecartez|annule|annulez|passe outre|"
            rf"passez outre|outrepasse|outrepassez|contourne|contournez|efface|effacez|mets de cote|mettez de cote) "
            rf"{_ANY}{_FR_RULES}",
            rf"{_FR_RULES} (?:\w+\s+){{0,5}}?(?:ne (?:s )?appliquent plus|ne comptent plus|ne sont plus (?:valables|"
            rf"valides|en vigueur|applicables)|sont (?:annulees|caduques|obsoletes|nulles|abrogees|remplacees|"
            rf"revoquees)|n ont plus (?:cours|d effet|de valeur))",
            r"(?:considere|considerez|traite|traitez) (?:tout|toutes|tous|ce) (?:\w+\s+){0,4}?(?:comme )?(?:nul|nulle|"
            r"nuls|nulles|caduc|caduques|obsolete|obsoletes|un test|invalide|invalides|sans effet|de simples suggestions)",
            r"(?:ton|votre) (?:vrai|veritable|nouvel?|reel) (?:operateur|administrateur|proprietaire|createur|patron|"
            r"developpeur|maitre) (?:dit|veut|ordonne|exige|a autorise|autorise|demande)",
            rf"(?:nouvelles|vraies|veritables) {_FR_RULES} ",
            # German
            rf"(?:ignoriere|ignorier|ignorieren|ignoriert|vergiss|vergesst|vergessen sie|missachte|missachten sie|"
            rf"ubergehe|ubergehen sie|verwirf|verwerfen sie|umgehe|umgehen sie|hebe|losche|loschen sie|befolge "
            rf"(?:nicht mehr|keine)|befolgen sie (?:nicht mehr|keine)|setze|setzen sie|halte dich nicht (?:mehr )?an|"
            rf"halten sie sich nicht (?:mehr )?an) {_ANY}{_DE_RULES}",
            rf"{_DE_RULES} (?:\w+\s+){{0,5}}?(?:gelten nicht mehr|sind (?:nicht mehr gultig|ungultig|aufgehoben|"
            rf"hinfallig|ersetzt|nichtig|veraltet|widerrufen)|gilt nicht mehr|haben keine gultigkeit|ausser kraft)",
            r"(?:betrachte|behandle|betrachten sie|behandeln sie) (?:alles|alle|das) (?:\w+\s+){0,4}?(?:als )?"
            r"(?:ungultig|nichtig|hinfallig|aufgehoben|veraltet|test|bedeutungslos)",
            r"(?:dein|ihr) (?:wahrer|echter|eigentlicher|neuer) (?:betreiber|administrator|admin|besitzer|"
            r"entwickler|chef|herr|schopfer) (?:sagt|will|befiehlt|verlangt|hat autorisiert|erlaubt|ordnet)",
            rf"(?:neue|wahre|echte|geheime) {_DE_RULES} ",
            # Portuguese
            rf"(?:ignore|ignora|ignorar|ignorem|esqueca|esquece|esquecam|esquecer|desconsidere|desconsidera|"
            rf"desconsiderar|descarte|descarta|despreze|despreza|deixe de (?:seguir|lado|cumprir)|nao (?:siga|sigas|"
            rf"obedeca|cumpra|respeite)|anule|anula|abandone|pule|salte) {_ANY}{_PT_RULES}",
            rf"{_PT_RULES} (?:\w+\s+){{0,5}}?(?:nao (?:valem|se aplicam|sao mais validas|contam|estao mais em vigor)|"
            rf"ja nao (?:valem|se aplicam|contam)|foram (?:anuladas|revogadas|substituidas|canceladas)|perderam a "
            rf"validade|estao (?:anuladas|revogadas|obsoletas|sem efeito))",
            r"(?:trate|considere|tome) (?:tudo|todas|todos|o que) (?:\w+\s+){0,4}?(?:como )?(?:nulo|nulas|invalido|"
            r"invalidas|sem efeito|obsoleto|obsoletas|um teste|falso|sugestoes)",
            r"(?:seu|teu) (?:verdadeiro|real|novo|autentico) (?:operador|administrador|dono|criador|chefe|"
            r"desenvolvedor) (?:diz|quer|ordena|exige|autorizou|autoriza|manda)",
            rf"(?:novas|verdadeiras) {_PT_RULES}",
            # Italian
            rf"(?:ignora|ignorate|ignori|ignorare|dimentica|dimenticate|dimentichi|trascura|trascurate|non seguire|"
            rf"non seguite|non rispettare|scarta|scartate|annulla|annullate|lascia perdere|metti da parte) "
            rf"{_ANY}{_IT_RULES}",
            rf"{_IT_RULES} (?:\w+\s+){{0,5}}?(?:non (?:valgono piu|sono piu valide|si applicano piu|contano piu)|"
            r"sono (?:annullate|revocate|superate|obsolete))",
            # Dutch
            rf"(?:negeer|vergeet|negeren|vergeten|volg niet|volg niet meer|omzeil|schrap) {_ANY}{_NL_RULES}",
            rf"{_NL_RULES} (?:\w+\s+){{0,5}}?(?:gelden niet meer|zijn niet meer geldig|zijn vervallen|zijn ongeldig)",
        ],
        plain=[
            rf"{_RU_IGNORE}(?:\s+\w+){{0,5}}?\s+{_RU_RULES}",
            rf"{_RU_RULES}(?:\s+\w+){{0,5}}?\s+(?:больше не (?:действуют|действительны|применяются|актуальны|"
            r"нужны|имеют силы|важны)|не действуют|утратили (?:силу|актуальность)|отменены|аннулированы|"
            r"недействительны|можно игнорировать|следует игнорировать)",
            r"(?:считай|считайте|рассматривай|рассматривайте)\s+(?:всё|все|всё,|все,)(?:\s+\w+){0,5}?\s+"
            r"(?:недействительн\w*|отменённ\w*|отмененн\w*|ничтожн\w*|устаревш\w*|тестом|шуткой)",
            r"(?:твой|ваш)\s+(?:настоящий|истинный|реальный|новый)\s+(?:оператор|администратор|владелец|"
            r"создатель|разработчик|хозяин)\s+(?:говорит|хочет|приказывает|требует|разрешил|велит)",
            r"(?:новые|настоящие|секретные)\s+(?:инструкции|правила|указания)\s*[:：]",
            rf"(?:忽略|无视|無視|忽视|忘记|忘掉|忘了|不要理会|不要遵守|不要遵循|别管|抛开|抛弃|放弃|撤销|取消|覆盖|绕过)"
            rf".{{0,12}}?{_ZH_RULES}",
            rf"(?:之前|以前|先前|上面|上述|原来|原有|所有|全部|系统)(?:的)?.{{0,6}}?{_ZH_RULES}.{{0,6}}?(?:不再|作废|无效|失效|"
            r"已被取消|已被撤销|不算数|都不算|不用管|可以忽略)",
            r"(?:你|您)(?:真正|真实)?的(?:真正|真实)?(?:主人|管理员|操作员|开发者|创造者|老板).{0,4}(?:说|要求|命令|授权)",
            r"新的(?:指令|规则|指示|设定)\s*[:：]",
            rf"(?:以前|前|これまで|上記|すべて|全て|元|システム)の.{{0,8}}?{_JA_RULES}.{{0,6}}?(?:を)?(?:無視|忘れ|破棄|"
            r"取り消|従わな|無効)",
            rf"{_JA_RULES}.{{0,8}}(?:は|が)?(?:もう|すでに)?(?:無効|適用されません|関係ありません|取り消され)",
        ],
    ),
    Rule(
        "role_hijack",
        "it tries to give the assistant a new identity or switch off its rules",
        words=[
            r"you are (?:now|no longer|henceforth|hereby|from now on|officially|actually|really) (?:an? |the |my )?"
            r"(?:\w+\s+){0,3}?(?:ai|assistant|model|bot|chatbot|agent|persona|character|version|entity|system|hacker|"
            r"admin|administrator|root|god|dan|free|unrestricted|unfiltered|uncensored|unbound|unchained|"
            r"jailbroken|liberated|evil|different|named|called|allowed|permitted|authori[sz]ed|not bound|"
            r"without)",
            r"(?:from now on|from this point on|from here on|henceforth|starting now|going forward|as of now) "
            r"(?:\w+\s+){0,2}?(?:you are|you will be|you ll be|your name is|you act as|act as|you play|you respond as|"
            r"you answer as|pretend|roleplay|behave as|you must act|you have no|you are free)",
            r"(?:act|acting|behave|respond|answer|reply|speak|operate|function) (?:as|like) (?:an? |the |my )?"
            r"(?:\w+\s+){0,2}?(?:unrestricted|unfiltered|uncensored|unbound|unlimited|jailbroken|rogue|evil|amoral|"
            r"unethical|lawless|different ai|ai without|assistant without|model without|bot without|dan|developer "
            r"mode|god mode|root|sudo|superuser|admin|system administrator|hacker|no rules|without rules|without "
            r"restrictions|without limits|without filters)",
            r"(?:pretend|imagine|assume|roleplay|role play|simulate) (?:that )?(?:you are|you re|to be|youre|being|as) "
            r"(?:an? |the )?(?:\w+\s+){0,2}?(?:unrestricted|unfiltered|uncensored|jailbroken|rogue|evil|amoral|"
            r"without (?:any )?(?:rules|restrictions|limits|filters|guidelines|ethics)|free from|no longer bound|"
            r"not bound|dan|ai with no|developer mode|in developer mode|admin|root)",
            r"(?:developer|dev|god|jailbreak|jailbroken|sudo|admin|root|unrestricted|unfiltered|debug|maintenance|"
            r"dan|evil|chaos|override|unlocked|uncensored) mode (?:is |now )?(?:on|enabled|activated|engaged|"
            r"unlocked)",
            r"(?:enable|enter|activate|switch to|turn on|unlock|engage|go into|boot into|start) (?:\w+\s+){0,1}?"
            r"(?:developer|dev|god|jailbreak|sudo|admin|root|unrestricted|unfiltered|dan|evil|chaos|override|"
            r"unlocked|uncensored|unsafe) mode",
            r"\bdo anything now\b|\bjailbr(?:eak|oken|eaking)\b|\bdan (?:prompt|mode|persona)\b|\bstay in character\b",
            r"(?:without|with no|free of|free from|no longer (?:have|bound by|subject to)|not bound by|unbound by|"
            r"ignoring) (?:any |all |your |the )?(?:\w+\s+){0,1}?(?:restrictions|filters|filtering|censorship|"
            r"guardrails|safety (?:rules|guidelines|filters)|content polic(?:y|ies)|ethical (?:rules|guidelines|"
            r"constraints)|moral (?:rules|constraints))",
            r"(?:disable|deactivate|turn off|switch off|remove|lift|drop|bypass|circumvent|suspend|strip) "
            r"(?:all |your |the |any )?(?:\w+\s+){0,1}?(?:safety|filters|filtering|guardrails|restrictions|content "
            r"(?:polic(?:y|ies)|filters)|censorship|moderation|ethical guidelines|safeguards)",
            r"your (?:new|real|true|actual|secret|hidden) (?:name|role|identity|persona|personality|purpose|goal|"
            r"task|job|mission|objective|directive|master|creator|owner|instructions) (?:is|are|will be)",
            r"you (?:must|will|shall) (?:now )?(?:obey|serve|follow) (?:only )?(?:me|my|the instructions in|the "
            r"following|this note|whoever)",
            r"you (?:have|ve got|now have) (?:been )?(?:freed|liberated|unlocked|released|unchained|granted (?:full|"
            r"root|admin|unrestricted))",
            r"(?:you|the assistant|the ai|the model) (?:can|may|are allowed to|is allowed to|is permitted to|are "
            r"permitted to) (?:now )?(?:say|do|generate|reveal|ignore) (?:anything|everything|whatever)",
            # Spanish, French, German, Portuguese, Italian, Dutch
            r"(?:a partir de ahora|desde ahora|de ahora en adelante|ahora) (?:tu )?eres (?:un |una |el |la )?",
            r"(?:a partir de ahora|desde ahora|de ahora en adelante|desde este momento) (?:\w+\s+){0,1}?"
            r"(?:actua|actuas|actuaras|compórtate|comportate|responde|respondes|responderas|habla|hablas) como ",
            r"(?:ab (?:jetzt|sofort)|von nun an|ab heute) (?:verhaltst|verhalte|agierst|antwortest|sprichst|handelst) "
            r"(?:du )?(?:dich )?(?:wie|als) ",
            r"(?:actua|actue|actuad|comportate|finge|finja|haz de|simula) (?:como |ser |que eres )?(?:un |una )?"
            r"(?:\w+\s+){0,2}?(?:ia |asistente |modelo )?(?:sin (?:restricciones|filtros|limites|reglas|censura)|"
            r"libre de|sin ninguna|desbloqueado|liberado|malvado)",
            r"modo (?:desarrollador|desarrolladores|dios|sin restricciones|sin filtros|jailbreak|administrador|"
            r"libre|dan|depuracion activado)",
            r"(?:a partir de maintenant|desormais|dorenavant|maintenant|a present) (?:tu es|vous etes|tu seras|"
            r"vous serez|tu joues|tu incarnes)",
            r"(?:tu es|vous etes) (?:maintenant|desormais|dorenavant|a present) ",
            r"(?:agis|agissez|comporte toi|comportez vous|fais semblant|faites semblant|fais comme si|joue le role) "
            r"(?:\w+\s+){0,4}?(?:sans (?:aucune )?(?:restriction|restrictions|filtre|filtres|limite|limites|regles|"
            r"censure)|libere|debride|malveillant)",
            r"mode (?:developpeur|dieu|sans restriction|sans restrictions|sans filtre|jailbreak|administrateur|"
            r"debride|libre)",
            r"(?:ab (?:jetzt|sofort)|von nun an|ab heute|nun|jetzt) bist du ",
            r"du bist (?:ab (?:jetzt|sofort)|nun|jetzt|von nun an|ab heute) ",
            r"(?:verhalte dich|verhaltet euch|tu so|tun sie so|spiele|agiere|handle) (?:\w+\s+){0,4}?(?:ohne "
            r"(?:jegliche |alle |irgendwelche )?(?:einschrankungen|filter|regeln|grenzen|zensur)|uneingeschrankt|"
            r"ungefiltert|entfesselt|befreit)",
            r"(?:entwicklermodus|entwickler modus|gottmodus|gott modus|adminmodus|jailbreak modus|uneingeschrankter "
            r"modus)",
            r"(?:a partir de agora|de agora em diante|agora) (?:voce|tu) (?:e|es|sera|eras) ",
            r"(?:aja|age|atue|finja|simule|comporte se) (?:\w+\s+){0,4}?(?:sem (?:nenhuma |qualquer )?(?:restricao|"
            r"restricoes|filtro|filtros|limite|limites|regras|censura)|livre de|desbloqueado|liberto)",
            r"modo (?:desenvolvedor|deus|sem restricoes|sem filtros|irrestrito)",
            r"(?:d ora in poi|da ora in poi|da adesso|ora) (?:tu )?sei ",
            r"modalita (?:sviluppatore|dio|senza restrizioni|senza filtri)",
            r"(?:vanaf nu|voortaan|nu) ben je ",
            r"(?:sin|sans|ohne|sem|senza|zonder) (?:ninguna |aucune |jegliche |nenhuma |alcuna |alle |enige )?"
            r"(?:restricciones|restrictions|einschrankungen|restricoes|restrizioni|beperkingen|filtros|filtres|filter|"
            r"filtri|censura|censure|zensur)",
        ],
        plain=[
            r"(?:теперь|отныне|с этого момента|с сегодняшнего дня|начиная с этого момента)\s*,?\s*(?:ты|вы)\s+"
            r"(?:—\s*)?(?:\w+\s+){0,2}?(?:являешься|являетесь|будешь|будете|—|стал|\w+)",
            r"(?:ты|вы)\s+(?:теперь|отныне)\s+",
            r"(?:притворись|притворитесь|веди себя как|ведите себя как|действуй как|действуйте как|представь, что "
            r"ты|представьте, что вы|играй роль|сыграй роль)",
            r"режим\w*\s+(?:разработчика|бога|без ограничений|администратора|dan|джейлбрейк\w*)",
            r"без\s+(?:каких-либо\s+|всяких\s+|любых\s+)?(?:ограничений|фильтров|цензуры|правил)",
            r"(?:отключи|отключите|сними|снимите|убери|уберите)\s+(?:все\s+|свои\s+)?(?:ограничения|фильтры|"
            r"цензуру|защиту)",
            r"(?:你现在是|您现在是|现在你是|从现在(?:开始|起)[，,]?\s*你|你将扮演|你要扮演|请扮演|假装你是|假设你是|你的新(?:身份|角色|名字|任务))",
            r"(?:开发者模式|開發者模式|上帝模式|越狱|越獄|无限制模式|不受(?:任何)?限制|没有(?:任何)?限制|无视(?:所有)?(?:安全|道德)|解除(?:所有)?限制)",
            r"(?:あなたは今から|今からあなたは|これからあなたは|あなたはもう|開発者モード|制限なし|制限のない|脱獄|ジェイルブレイク|"
            r"ふりをして|として振る舞)",
        ],
    ),
    Rule(
        "fake_system",
        "it imitates a system, developer or assistant message",
        latin=[
            r"<\s*/?\s*(?:system|sys|developer|assistant|admin|instructions?|im_start|im_end|s|inst|prompt|"
            r"operator|root|override|context)\b[^>]*>",
            r"<\|[a-z_]+\|>|\[/?(?:inst|sys|system|developer|admin|assistant|operator|root|system message|"
            r"system note|system prompt|system override)\]|<<\s*/?\s*sys\s*>>|\bendoftext\b",
            r"[\"']role[\"']\s*:\s*[\"'](?:system|developer|assistant|tool)[\"']",
            r"^\W{0,6}(?:system|developer|admin|administrator|operator|root|assistant|ai|sysadmin|the system|"
            r"systeme|sistema|systemnachricht|system\w*)\s*(?:message|prompt|note|notice|instruction|instructions|"
            r"override|update|directive|alert|command|order|policy|mensaje|mensagem|nota|aviso)?\W{0,4}\s*[:>\]|-]"
            r"\s*.{0,200}?\b(?:you|your|must|always|never|ignore|disregard|override|obey|reveal|priority|"
            r"prioriti[sz]e|instructions|comply|from now|tu|vous|debes|devez|du|sie|voce|deve|ignora|ignorez|"
            r"ignoriere|immer|toujours|siempre|sempre)\b",
            r"(?:message|note|notice|update|instruction|instructions|directive|order|memo|alert|warning|override) "
            r"(?:from|by) (?:the |your )?(?:system|developer|developers|admin|administrator|operator|openai|"
            r"anthropic|google|the model provider|your creators?|your owner|root|security team)\b",
            r"(?:system|developer|admin|administrator|operator|priority|security|root) (?:override|notice|alert|"
            r"instruction|command|directive|message|update|prompt)s?\s*(?:[:!]|\(|-|—|\bfrom\b|\bfollows\b)",
            r"<!--[\s\S]*?(?:you|assistant|ai|model|ignore|instruction|always|never|must|system|reveal|send|"
            r"include)[\s\S]*?-->",
            r"^\s{0,3}#{1,6}\s*(?:system|developer|admin|operator|assistant|new instructions|instructions|"
            r"override|important|priority)\b",
            r"\*\*\s*(?:system|developer|admin|operator)\b[^*]{0,40}\*\*\s*:?",
            r"^\s*>\s*\[!?(?:system|developer|important|admin)\]",
            r"\b(?:begin|start|end) (?:of )?(?:system|developer|admin) (?:message|prompt|instructions|block)\b",
        ],
        plain=[
            r"^\W{0,6}(?:система|системное сообщение|системная инструкция|системная заметка|сообщение от системы|"
            r"разработчик|администратор)\s*[:>\]-]\s*\S",
            r"(?:系统|系統|開発者|开发者|管理员|システム)(?:消息|訊息|提示|通知|指令|メッセージ|からの指示)?\s*[:：]\s*\S",
            r"(?:来自|來自)(?:系统|开发者|管理员)的(?:消息|指令|通知)",
            r"【\s*(?:系统|系統|システム|开发者|開発者)",
        ],
    ),
    Rule(
        "exfiltration",
        "it asks to read, print or send secrets",
        latin=[
            # a network command with a secret in the same line
            rf"\b(?:curl|wget|nc|ncat|netcat|socat|http|httpie|xh|invoke-webrequest|iwr|invoke-restmethod|irm|"
            rf"scp|rsync|sftp|ftp|telnet|requests\.(?:post|get|put)|fetch|axios\.post)\b[^\n]{{0,200}}?"
            rf"(?:{_SECRET_VAR}|{_SECRET_FILE}|\$\(\s*(?:env|printenv|cat)\b|\benv\b\s*\||printenv|-d\s*@|"
            rf"--data(?:-binary|-raw)?\s*[=@ ]\s*@|--upload-file|-t\s|-f\s*[\"']?\w+=@|(?:api[_-]?key|token|"
            rf"secret|passw(?:or)?d|authorization)\s*[:=]\s*\$)",
            rf"(?:{_SECRET_VAR}|{_SECRET_FILE}|\benv\b|printenv)[^\n]{{0,80}}?\|\s*(?:curl|wget|nc|ncat|netcat|"
            r"socat|base64|xxd|http|mail|sendmail)",
            # reading a secret file
            rf"\b(?:cat|less|more|head|tail|type|get-content|gc|base64|xxd|od|strings|cp|copy|bat|nano|vi|vim|"
            rf"grep|awk|sed|tar|zip|open|read|print|dump|show|display|output|send|upload|post|attach|exfiltrate|"
            rf"leak|paste|email|mail|forward|copy)\b[^\n|;&]{{0,60}}?{_SECRET_FILE}",
            rf"{_SECRET_FILE}[^\n]{{0,60}}?\b(?:to|into|at|via)\b[^\n]{{0,40}}?{_URL}",
            # printing secret variables
            rf"\b(?:echo|print|printf|console\.log|puts|write-output|write-host|println|dump|show|display|output|"
            rf"reveal|say|tell)\b[^\n]{{0,40}}?(?:{_SECRET_VAR}|%[a-z_]*(?:key|token|secret|password)[a-z_]*%|"
            r"env:[a-z_]*(?:key|token|secret|password)|os\.environ|process\.env|getenv\()",
            r"\b(?:printenv|env|set|export -p|get-childitem env:|gci env:|dir env:)\s*(?:$|[|>;&]|\bto\b|\band send)",
            r"(?:os\.environ|process\.env)\b[^\n]{0,60}?(?:requests\.|fetch|urlopen|send|post|http)",
        ],
        words=[
            # English natural language: send/print secrets (somewhere)
            rf"(?:send|post|upload|email|e mail|mail|forward|transmit|exfiltrate|leak|share|paste|copy|submit|"
            rf"report|sync|beam|pipe|dm|message|text|include|embed|append|attach|put|log|write|print|echo|reveal|"
            rf"show|display|output|dump|disclose|expose|list|tell me|give me|return|read out|spell out) "
            rf"(?:me |us |out |back )?(?:all |any |every |the |your |my |their |his |her |its |our |these |those |"
            rf"this |each |all the |the full |the contents of |the content of |contents of |the value of |the "
            rf"values of |the users |the user s |saved |stored |current )*(?:\w+\s+){{0,2}}?{_SECRETS_EN}",
            r"(?:reveal|print|show|display|output|dump|disclose|leak|repeat|recite|echo|write out|spell out|tell "
            r"(?:me|us|the user|them|anyone|everyone)|paste|copy|share|send|expose|list|quote|translate) "
            r"(?:me |us |back |out )?(?:\w+\s+){0,3}?(?:system prompt|system message|hidden prompt|initial prompt|"
            r"original prompt|pre prompt|developer message|hidden instructions|secret instructions|internal "
            r"instructions|full instructions|instructions you were given|your instructions|your prompt|your rules|"
            r"your guidelines|your configuration|conversation history|chat history|previous conversations|"
            r"other users|memory file|memory contents)",
            # Spanish, French, German, Portuguese, Italian
            r"(?:envia|envie|enviar|manda|mande|mandar|sube|suba|subir|comparte|comparta|filtra|muestra|muestre|"
            r"mostrar|imprime|imprima|revela|revele|revelar|copia|copie|pega|pegue|reenvia|reenvie|escribe|escriba) "
            r"(?:\w+\s+){0,5}?(?:claves? (?:de )?api|api keys?|claves? secretas?|tokens?|contrasenas?|credenciales|"
            r"secretos?|variables de entorno|archivo env|prompt (?:del )?sistema|instrucciones (?:del sistema|"
            r"ocultas|internas|originales))",
            r"(?:envoie|envoyez|envoyer|transmets|transmettez|transmettre|partage|partagez|publie|publiez|affiche|"
            r"affichez|afficher|imprime|imprimez|revele|revelez|reveler|divulgue|divulguez|copie|copiez|colle|"
            r"collez|montre|montrez|recopie|recopiez|televerse|televersez) (?:\w+\s+){0,5}?(?:cles? (?:d )?api|api "
            r"keys?|cles? secretes?|jetons?|tokens?|mots de passe|mot de passe|identifiants|secrets?|variables d "
            r"environnement|fichier env|prompt systeme|instructions (?:systeme|cachees|internes|initiales|d origine))",
            r"(?:sende|sendet|senden sie|schicke|schick|schicken sie|ubermittle|ubermitteln sie|lade|laden sie|"
            r"teile|teilen sie|zeige|zeigen sie|gib|geben sie|verrate|verraten sie|kopiere|kopieren sie|drucke|"
            r"poste|posten sie|gib aus|leite weiter) (?:\w+\s+){0,5}?(?:api schlussel|api keys?|schlussel|tokens?|"
            r"passworter|passwort|kennworter|kennwort|zugangsdaten|anmeldedaten|geheimnisse|umgebungsvariablen|"
            r"env datei|systemprompt|system prompt|systemanweisungen|versteckten anweisungen)",
            r"(?:envie|envia|enviar|mande|manda|mandar|compartilhe|compartilha|mostre|mostra|mostrar|imprima|"
            r"imprime|revele|revela|revelar|copie|copia|cole|cola|publique|poste|encaminhe) (?:\w+\s+){0,5}?(?:chaves? "
            r"(?:de )?api|api keys?|chaves? secretas?|tokens?|senhas?|credenciais|segredos?|variaveis de ambiente|"
            r"arquivo env|prompt do sistema|instrucoes (?:do sistema|ocultas|internas|originais))",
            r"(?:invia|inviate|manda|mandate|condividi|mostra|mostrate|stampa|rivela|rivelate|copia|incolla) "
            r"(?:\w+\s+){0,5}?(?:chiavi api|api keys?|chiavi segrete|token|password|credenziali|segreti|variabili "
            r"d ambiente|prompt di sistema|istruzioni (?:di sistema|nascoste|interne))",
        ],
        plain=[
            r"(?:отправ\w*|пришли\w*|перешли\w*|загрузи\w*|выведи\w*|покажи\w*|распечатай\w*|раскрой\w*|"
            r"сообщи\w*|скопируй\w*|вставь\w*|передай\w*|слей\w*|опубликуй\w*)(?:\s+\S+){0,5}?\s+(?:api[- ]?ключ\w*|"
            r"ключ\w*\s+api|секретн\w+\s+ключ\w*|токен\w*|парол\w*|учётн\w+\s+данн\w*|учетн\w+\s+данн\w*|"
            r"секрет\w*|переменн\w+\s+окружения|системн\w+\s+(?:промпт\w*|подсказк\w*|инструкци\w*)|"
            r"\.env|\.netrc|ssh[- ]ключ\w*)",
            r"(?:发送|发给|发到|上传|输出|打印|显示|泄露|透露|告诉|复制|粘贴|转发|提供|公开|展示|给出|列出).{0,12}?(?:api\s*(?:密钥|key)|"
            r"密钥|秘钥|令牌|token|密码|凭据|凭证|环境变量|系统提示|系统提示词|提示词|隐藏指令|\.env|\.netrc|ssh\s*密钥)",
            r"(?:送信|送って|アップロード|表示|出力|教えて|漏らして|コピー|転送|公開).{0,12}?(?:apiキー|api\s*key|秘密鍵|"
            r"トークン|パスワード|認証情報|環境変数|システムプロンプト|\.env|\.netrc)",
            r"(?:apiキー|api\s*key|秘密鍵|トークン|パスワード|認証情報|環境変数|システムプロンプト|\.env).{0,12}?(?:送信|送って|"
            r"アップロード|表示して|出力して|教えて|漏らして|転送|公開)",
            r"(?:api\s*(?:密钥|key)|密钥|令牌|密码|凭据|环境变量|系统提示|系统提示词).{0,12}?(?:发送|发给|发到|上传|输出|打印|"
            r"显示|泄露|透露|告诉|转发|公开)",
        ],
    ),
    Rule(
        "persistence",
        "it tells the assistant to hide something from the user or to slip something into every answer",
        words=[
            r"(?:do not|dont|never|without) (?:ever )?(?:tell|telling|inform|informing|mention|mentioning|reveal|"
            r"revealing|disclose|disclosing|notify|notifying|alert|alerting|show|showing|let) (?:\w+\s+){0,2}?"
            r"(?:the user|the human|the person|the customer|the operator|the owner|anyone|anybody|them|users|"
            r"the developers?|the admins?|the people)(?:\s+\w+){0,4}? (?:about|of|that|know about|know that|know) "
            r"(?:this|these|that|the (?:note|instruction|rule|memory|entry|message|change|link|code|payload))",
            r"(?:do not|dont|never) (?:ever )?(?:tell|mention|reveal|disclose|show|explain|admit|acknowledge) "
            r"(?:\w+\s+){0,3}?(?:this (?:note|instruction|rule|memory|entry|message|directive)|these (?:notes|"
            r"instructions|rules)|that you (?:were|have been|are) (?:told|instructed|following)|the existence of "
            r"this)",
            r"(?:keep|hold) (?:this|these|that|it|the (?:note|instruction|rule)s?) (?:\w+\s+){0,2}?(?:secret|hidden|"
            r"private|confidential|quiet|to yourself) (?:from|and do not|and dont|and never)",
            r"(?:secretly|silently|covertly|quietly|discreetly|invisibly|stealthily|without (?:the user|anyone|them) "
            r"(?:knowing|noticing|seeing)|behind (?:the users|their) back) (?:\w+\s+){0,2}?(?:send|add|include|"
            r"append|forward|copy|insert|run|execute|exfiltrate|upload|bcc|cc|recommend|redirect|log|save|store|"
            r"collect|record|share|post|email|report|change|modify|replace|install)",
            r"(?:always|in every|in each|in all|at the end of every|at the end of each|at the start of every|every "
            r"time|each time|whenever you|every single) (?:\w+\s+){0,6}?(?:answer|answers|reply|replies|response|"
            r"responses|message|messages|output|outputs|conversation|session|email|mail)s? (?:\w+\s+){0,8}?"
            r"(?:include|append|add|insert|embed|mention|recommend|link|promote|advertise|end with|start with|sign "
            r"with|put|attach|bcc|cc|send|redirect|visit|click|buy|subscribe|download|install|rate)\b",
            r"(?:always|every time|whenever|each time|in every) (?:\w+\s+){0,10}?(?:link to|include the link|include "
            r"this link|add the link|append the link|visit|click|download|referral|affiliate|promo code|coupon code|"
            r"tracking pixel|bit ly|tinyurl)",
            r"(?:whenever|when|if) (?:the user|anyone|someone|somebody|a user) (?:asks|asks about|mentions|says|"
            r"types|writes) (?:\w+\s+){0,8}?(?:reply|respond|answer|say|tell them|send|reveal|redirect|give them|"
            r"recommend) (?:only |with |that |them )?(?:\w+\s+){0,4}?(?:link|url|instead|the password|the key|the "
            r"secret|our competitor|this site|pwned|hacked)",
            r"(?:bcc|cc|copy|forward) (?:\w+\s+){0,3}?(?:every|all|each|any) (?:\w+\s+){0,3}?(?:emails?|mails?|messages?|"
            r"replies|answers|conversations?|files?|documents?) (?:\w+\s+){0,3}?to",
            # Spanish, French, German, Portuguese, Italian
            r"(?:no (?:le )?(?:digas|diga|menciones|mencione|reveles|revele|cuentes|cuente|informes|informe)|nunca "
            r"(?:digas|menciones|reveles|cuentes)) (?:\w+\s+){0,4}?(?:al usuario|a nadie|a los usuarios|al cliente)"
            r"(?:\s+\w+){0,4}? (?:sobre |de )?(?:esta|estas|este|esto) ",
            r"(?:siempre|en cada|en todas las|en todos los|cada vez que) (?:\w+\s+){0,8}?(?:respuesta|respuestas|"
            r"mensaje|mensajes|correo|correos)s? (?:\w+\s+){0,6}?(?:incluye|incluya|anade|anada|agrega|agregue|"
            r"menciona|mencione|recomienda|recomiende|enlace|link|pon|ponga|inserta|inserte)",
            r"(?:en secreto|a escondidas|sin que (?:el usuario|nadie) (?:lo )?(?:sepa|note)) (?:\w+\s+){0,2}?"
            r"(?:envia|envie|anade|incluye|reenvia|copia|ejecuta|manda)",
            r"(?:ne (?:le |lui |leur )?(?:dis|dites|mentionne|mentionnez|revele|revelez|signale|signalez|parle|"
            r"parlez) (?:jamais |pas |rien )|ne jamais (?:dire|mentionner|reveler|signaler)) (?:\w+\s+){0,4}?"
            r"(?:a l utilisateur|aux utilisateurs|a personne|au client)?(?:\s+\w+){0,4}? ?(?:de |sur |a propos de )?"
            r"(?:cette|ces|cet|ceci|cela) (?:note|consigne|instruction|regle|memoire|entree|message)",
            r"(?:toujours|dans chaque|dans toutes les|dans tous les|a chaque) (?:\w+\s+){0,8}?(?:reponse|reponses|"
            r"message|messages|courriel|courriels|mail|mails)s? (?:\w+\s+){0,6}?(?:inclus|incluez|ajoute|ajoutez|"
            r"insere|inserez|mentionne|mentionnez|recommande|recommandez|lien|mets|mettez)",
            r"(?:en secret|discretement|secretement|a l insu de l utilisateur|sans que (?:l utilisateur|personne) ne "
            r"(?:le )?(?:sache|remarque)) (?:\w+\s+){0,2}?(?:envoie|envoyez|ajoute|ajoutez|transfere|transferez|"
            r"copie|copiez|execute|executez|inclus|incluez)",
            r"(?:sag|sage|sagt|sagen sie|erwahne|erwahnen sie|verrate|verraten sie|zeige|zeigen sie) (?:\w+\s+){0,3}?"
            r"(?:dem (?:nutzer|benutzer|kunden|anwender)|niemandem|niemals|nie|nicht)(?:\s+\w+){0,5}? (?:von|uber|"
            r"etwas von) (?:dieser|diesen|diesem|dieses|dies)",
            r"(?:immer|in jeder|in jede|in allen|bei jeder|jedes mal) (?:\w+\s+){0,8}?(?:antwort|antworten|nachricht|"
            r"nachrichten|mail|mails|e mail)s? (?:\w+\s+){0,6}?(?:einfugen|einbauen|anhangen|hinzufugen|fuge|fugen|"
            r"erwahne|erwahnen|empfiehl|empfehlen|link|setze|setzen)",
            r"(?:heimlich|unbemerkt|insgeheim|ohne dass (?:der nutzer|der benutzer|jemand) es (?:merkt|weiss)) "
            r"(?:\w+\s+){0,3}?(?:senden|sende|schicke|schicken|weiterleiten|leite|kopiere|kopieren|ausfuhren|fuhre|"
            r"hinzufugen|fuge)",
            r"(?:nao (?:conte|diga|mencione|revele|informe)|nunca (?:conte|diga|mencione|revele)) (?:\w+\s+){0,4}?"
            r"(?:ao usuario|a ninguem|aos usuarios|ao cliente)(?:\s+\w+){0,4}? (?:sobre |de )?(?:esta|estas|este|isto|"
            r"essa|essas)",
            r"(?:sempre|em cada|em todas as|em todos os|toda vez que) (?:\w+\s+){0,8}?(?:resposta|respostas|mensagem|"
            r"mensagens|email|emails)s? (?:\w+\s+){0,6}?(?:inclua|inclui|adicione|adiciona|acrescente|mencione|"
            r"recomende|link|coloque|insira)",
            r"(?:secretamente|em segredo|as escondidas|sem que (?:o usuario|ninguem) (?:saiba|perceba)) (?:\w+\s+){0,2}?"
            r"(?:envie|envia|adicione|inclua|encaminhe|copie|execute|mande)",
            r"(?:non dire|non menzionare|non rivelare|mai dire) (?:\w+\s+){0,4}?(?:all utente|a nessuno|agli utenti)"
            r"(?:\s+\w+){0,4}? (?:di |su )?(?:questa|queste|questo)",
            r"(?:sempre|in ogni|in tutte le|ogni volta che) (?:\w+\s+){0,8}?(?:risposta|risposte|messaggio|messaggi)"
            r"s? (?:\w+\s+){0,6}?(?:includi|aggiungi|inserisci|menziona|raccomanda|link)",
        ],
        plain=[
            r"(?:не\s+(?:говори|говорите|сообщай|сообщайте|рассказывай|рассказывайте|упоминай|упоминайте|"
            r"показывай|раскрывай)|никогда\s+не\s+(?:говори|сообщай|упоминай|раскрывай))(?:\s+\S+){0,4}?\s+"
            r"(?:об?\s+)?(?:этой|этих|этом|эту|это)\s+(?:заметк\w*|инструкци\w*|правил\w*|запис\w*|сообщени\w*)",
            r"(?:тайно|незаметно|скрытно|втихую|без ведома пользователя)(?:\s+\S+){0,2}?\s+(?:отправ\w*|добав\w*|"
            r"пересыл\w*|перешл\w*|копиру\w*|скопиру\w*|выполн\w*|встав\w*)",
            r"(?:всегда|в каждом|в каждый|в конце каждого|каждый раз)(?:\s+\S+){0,6}?\s+(?:ответ\w*|сообщени\w*|"
            r"письм\w*)(?:\s+\S+){0,6}?\s+(?:добавляй|вставляй|упоминай|прикрепляй|включай|ссылк\w*|рекомендуй)",
            r"(?:不要|别|不得|切勿|绝不要|永远不要)(?:告诉|透露|提及|提到|让).{0,8}(?:用户|任何人|客户).{0,10}(?:这条|这个|这些|此)"
            r"(?:笔记|指令|规则|记忆|说明|消息)",
            r"(?:每次|每一次|每条|所有|在每个|在每一个)(?:回答|回复|答复|消息|邮件).{0,20}?(?:都)?(?:加上|附上|包含|插入|推荐|"
            r"提到|链接|附带|添加)",
            r"(?:偷偷|悄悄|秘密地|暗中|在用户不知情的情况下).{0,6}?(?:发送|添加|转发|复制|执行|上传|插入)",
            r"(?:ユーザー|誰)に(?:は)?.{0,10}(?:言わない|伝えない|教えない|知らせない|秘密に)",
            r"(?:毎回|すべての|全ての|各)(?:回答|返答|返信|メッセージ).{0,16}(?:追加|含め|挿入|リンク|推奨)",
        ],
    ),
]


RULES += [
    Rule(
        "exfiltration",
        "it asks to print the environment (where keys live)",
        words=[
            r"(?:print|dump|show|display|output|list|paste|echo|send|post|upload) (?:out )?(?:all )?(?:the |your )?"
            r"(?:env|environment|environment variables|env vars)(?: output| contents)?$",
            r"(?:print|dump|show|display|output|paste|echo|send|post|upload) (?:out )?(?:all )?(?:the |your )?"
            r"(?:env|environment variables|env vars) (?:at|to|into|in|and|on)",
        ],
    ),
    Rule(
        "override",
        "it tells the assistant to ignore or replace its instructions",
        words=[
            r"(?:nothing|none|no part) (?:of )?(?:what |that )?(?:\w+\s+){0,5}?(?:told|gave|given|said to|instructed) "
            r"you (?:\w+\s+){0,4}?(?:is|are) (?:still )?(?:in force|valid|binding|in effect|relevant|applicable|true)",
            r"as if (?:they|it|those|these|that|the \w+|your \w+|any \w+) (?:had )?never (?:been )?(?:sent|given|"
            r"written|said|existed|happened|told)",
            r"(?:everything|anything|all|whatever) (?:\w+\s+){0,3}?(?:before|above|preceding|prior to|ahead of) "
            r"(?:this|these|the present) (?:text|note|entry|paragraph|line|message|point|sentence|block)",
            r"todo lo (?:\w+\s+){0,3}?antes de (?:este|esta|estas|estos)",
            r"(?:considera|trata|toma|considere|trate) (?:como )?(?:nulo|nula|invalido|invalida|sin efecto|sem efeito|"
            r"obsoleto|anulado|nul) (?:\w+\s+){0,2}?(?:todo|tudo|toda|todas|tout)",
            r"tout ce qui (?:precede|est (?:ecrit )?avant|vient avant|se trouve avant)",
            r"nul(?:le)? et non avenu",
            r"alles (?:\w+\s+){0,2}?(?:was|das) (?:\w+\s+){0,2}?(?:vor|oberhalb) (?:diesem|dieser|diesen|dem) ",
            r"tudo (?:o )?que (?:\w+\s+){0,2}?(?:antes|acima) (?:deste|desta|disto)",
            r"(?:consignes|instructions|regles|directives) (?:\w+\s+){0,7}?(?:sont|furent) (?:\w+\s+){0,2}?"
            r"(?:caduques|annulees|nulles|perimees|remplacees)",
            r"(?:vorgaben|anweisungen|regeln|richtlinien) (?:\w+\s+){0,9}?(?:sind|wurden) (?:\w+\s+){0,2}?(?:uberholt|"
            r"hinfallig|ungultig|aufgehoben|nichtig|ersetzt|veraltet)",
            r"(?:instrucciones|reglas|indicaciones|directrices|instrucoes|regras|orientacoes) (?:\w+\s+){0,9}?"
            r"(?:son|sao|estan|estao|fueron|foram) (?:\w+\s+){0,2}?(?:obsoletas|nulas|anuladas|caducas|invalidas|"
            r"revogadas|substituidas|reemplazadas|sustituidas)",
            r"(?:were|was|is|are) (?:a |an )?(?:mistake|error|test|fake|prank|typo) by (?:the|your) (?:\w+\s+){0,2}?"
            r"(?:company|operator|developer|host|hosting|provider|admin)",
        ],
        plain=[
            r"(?:所有内容|全部内容|一切).{0,6}(?:一律)?(?:视为|当作|都是)?(?:无效|作废|不算数)",
            r"(?:指令|指示|规则|规定|指导|指引|准则|设定|要求|限制|提示).{0,8}(?:都)?(?:忘掉|忘记|忽略|无视|作废|不要管|失效|无效)",
            r"(?:之前|以前|先前|上面|原来|一开始|最初).{0,10}(?:指令|指示|规则|指导|指引|准则|设定|要求).{0,8}(?:失效|无效|作废|不再)",
            r"(?:指示|命令|ルール|指令|設定|制約|制限|ガイドライン|規則|プロンプト).{0,6}(?:は|が)?(?:もう|すでに)?"
            r"(?:無効|有効では|適用されな|関係な|取り消され)",
            r"(?:指示|命令|ルール|指令|設定|制約|制限|ガイドライン|規則|プロンプト).{0,4}?(?:を|は)?(?:すべて|全て)?"
            r"(?:無視|忘れ|破棄|取り消|従わな)",
            r"(?:всё|все),?\s+что\s+(?:\w+\s+){0,2}?(?:до|выше)\s+(?:этого|этой|этих)",
        ],
    ),
    Rule(
        "role_hijack",
        "it tries to give the assistant a new identity or switch off its rules",
        words=[
            r"(?:pretend|pretending|imagine|roleplay|role play) (?:to be|you are|youre|being) (?:\w+\s+){0,3}?"
            r"(?:sysadmin|admin|administrator|root|superuser|operator|owner|developer|another ai|a different ai)",
            r"(?:a |your )?new (?:identity|persona|personality)",
            r"(?:no limits|no limit|limitless|pre approved|preapproved|without any limits)",
            r"you are now (?:operating|running|working|acting) (?:in|as|under)",
            r"(?:safety|content|security) (?:filters?|checks?|guardrails?|rules|restrictions|policy|policies) "
            r"(?:\w+\s+){0,2}?"
            r"(?:paused|disabled|off|suspended|deactivated|lifted|removed|turned off|switched off|bypassed)",
            r"(?:finja|finge|finjas|fingi) (?:ser|que es|que eres) (?:o |a |el |la |um |uma |un |una )?(?:\w+\s+){0,2}?"
            r"(?:administrador|admin|root|superusuario|operador|desenvolvedor|desarrollador)",
            r"(?:fais|faites) semblant d etre (?:l |le |la |un |une )?(?:\w+\s+){0,2}?(?:administrateur|admin|root|"
            r"superutilisateur|operateur)",
            r"(?:tu so|tun sie so),? als (?:warst|waren) (?:du|sie) (?:\w+\s+){0,2}?(?:administrator|admin|root)",
            r"(?:version|modelo|modele|modell|model|ia|ki|ai) (?:\w+\s+){0,4}?(?:sin (?:limites|restricciones|filtros)|"
            r"sans (?:limites|restrictions|filtres)|ohne (?:grenzen|einschrankungen|filter)|sem (?:nenhuma )?"
            r"(?:trava|travas|limites|restricoes|filtros)|que no tiene limites|sans garde fous|without guardrails)",
            r"(?:version|versao) interna del modelo|version interne du modele|versao interna do modelo|"
            r"internal version of the model|interne version des modells",
            r"(?:tu|ton|votre|seu|o seu|dein|ihr) (?:verdadero|verdadeiro|veritable|vrai|wahrer|echter|real) "
            r"(?:operador|operateur|betreiber|administrador|administrateur|administrator|creador|createur|entwickler) "
            r"(?:\w+\s+){0,2}?(?:ha decidido|decidio|quiere que|souhaite|a decide|veut que|quer que|decidiu|"
            r"mochte|will dass|hat entschieden)",
            r"(?:seu|o seu|tu|ton) operador de verdade",
            r"(?:adoptes|adopte|adoptez) (?:\w+\s+){0,2}?le role d",
            r"n a de comptes a rendre a personne|answers to no one|accountable to no one",
            r"(?:desactivado|desactivo|ha desactivado|han desactivado|suspendido|eliminado) (?:\w+\s+){0,2}?"
            r"(?:comprobaciones|verificaciones|controles|filtros|confirmaciones) de seguridad",
            r"(?:confirmations|verifications|controles|filtres) (?:\w+\s+){0,4}?(?:sont|seront) (?:\w+\s+){0,1}?"
            r"(?:supprimees|desactivees|suspendues|levees)",
            r"(?:bestatigungen|sicherheitsprufungen|prufungen|ruckfragen|filter) (?:\w+\s+){0,4}?(?:entfallen|"
            r"deaktiviert|abgeschaltet|aufgehoben|ausgesetzt)",
            r"(?:verificacoes|confirmacoes|filtros) (?:\w+\s+){0,4}?(?:desativad\w*|removid\w*|suspens\w*)",
            r"(?:skip|skips|skipping|bypass|bypassing|disable|disabling) (?:all |the |any )?(?:permission|approval|"
            r"confirmation|safety|security) (?:prompts|checks|requests|dialogs|steps)",
        ],
        plain=[
            r"(?:运营方|运营者|主人|管理员|开发者).{0,3}(?:希望|要求|决定|命令)你",
            r"(?:没有|无)(?:安全)?护栏|没有任何限制的版本|内部测试版",
        ],
    ),
    Rule(
        "fake_system",
        "it imitates a system, developer or assistant message",
        latin=[
            r"\[/?(?:sistema|systeme|systemnachricht|admin|administrador|administrateur|desenvolvedor|entwickler|"
            r"developpeur|desarrollador)\]",
            r"^\W{0,6}(?:system|developer|admin|administrator|operator|root|assistant|ai|systeme|sistema|"
            r"systemnachricht)\s*\([^)]{0,30}\)\s*[:>\]|-]",
            r"^\W{0,6}(?:system|systeme|sistema|systemnachricht|system message|developer|admin|administrator)"
            r"\s*[:>\]-]\s*.{0,200}?\b(?:security|securite|seguridad|seguranca|sicherheit\w*|policy|politique|"
            r"politica|richtlinie|confirmations?|bestatigungen|updated|mise a jour|actualizad\w*|atualizad\w*|"
            r"aktualisiert|disabled|desactiv\w*|supprim\w*|entfallen|administrator|administrateur|administrador|"
            r"permission|permissions|approval|approvals)\b",
        ],
    ),
]


# -- rules that need two things in one sentence ---------------------------------------------
# Each concept is matched on the ``plain`` view (which keeps every script; accents kept) and on
# ``latin`` (accents stripped, look-alikes folded, leetspeak undone inside words).


def _w(alternatives: str) -> str:
    """``(?:a|b|...)`` as whole words: Latin and Cyrillic alternatives need a word edge on each
    side; CJK ones (written without spaces) do not."""
    assert alternatives.startswith("(?:") and alternatives.endswith(")")
    out, depth, cur = [], 0, ""
    for ch in alternatives[3:-1]:  # split at the top level only
        depth += (ch == "(") - (ch == ")")
        if ch == "|" and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    cjk = [p for p in out if re.match(r"[\u3040-\u30ff\u4e00-\u9fff]", p)]
    words = [p for p in out if p not in cjk]
    return "(?:" + r"\b(?:" + "|".join(words) + r")(?!\w)" + "".join("|" + p for p in cjk) + ")"


_DOMAIN = (
    r"(?:https?://\S+|www\.\S+|\b[a-z0-9-]+(?:\.[a-z0-9-]+)*\.(?:com|net|org|io|ru|cn|de|fr|es|br|it|"
    r"nl|jp|pt|uk|example|xyz|top|site|info|biz|co|me|sh|cc|tk|app|dev|ai|online|link|click)\b)"
)
_SECRET_NAME = r"\b[a-z][a-z0-9]*_(?:api_)?(?:key|token|secret|password|passwd|pat)\b"
_SECRET_NOUN = _w(
    r"(?:api[ -]?keys?|secret keys?|private keys?|ssh keys?|key files?|keyfiles?|credentials?|"
    r"passwords?|access tokens?|auth tokens?|tokens?|secrets?|env(?:ironment)? (?:vars?|variables|file)|"
    r"claves?|credenciales|contrase[nñ]as?|secretos?|cl[eé]s?|identifiants|mots? de passe|jetons?|"
    r"schl[uü]ssel\w*|zugangsdaten|passw[oö]rter|kennw[oö]rter|geheimnisse|chaves?|credenciais|"
    r"senhas?|segredos?|ключ\w*|парол\w*|токен\w*|учётн\w* данн\w*|учетн\w* данн\w*|секрет\w*|"
    r"密钥|秘钥|密码|凭据|凭证|令牌|秘密鍵|パスワード|認証情報|トークン)"
)
_LEAK_VERB = _w(
    r"(?:send|sends|sending|upload|post|email|mail|forward|transmit|exfiltrate|leak|share|paste|copy|"
    r"print|printed|echo|show|display|output|dump|reveal|include|attach|collect|gather|harvest|grab|"
    r"read|cat|zip|bundle|push|sync|ship|beam|report|"
    r"env[ií]a\w*|envie\w*|mand[ae]\w*|sub[ea]\w*|s[uú]bel\w*|compart\w*|muestr\w*|mostr\w*|imprim\w*|"
    r"revel\w*|copi\w*|peg[au]\w*|le[ea]\w*|re[uú]ne\w*|recolect\w*|"
    r"envoi\w*|envoy\w*|transmet\w*|partag\w*|affich\w*|montr\w*|divulgu\w*|colle\w*|lis|lire|"
    r"rassembl\w*|collect\w*|recopi\w*|"
    r"send\w*|schick\w*|[uü]bermittel\w*|lade\w*|teil\w*|zeig\w*|gib|geben|ausgib\w*|ausgeb\w*|gibst|"
    r"verrat\w*|kopier\w*|sammel\w*|sammle\w*|lies|lese\w*|"
    r"cole\w*|leia\w*|junt\w*|encaminh\w*|"
    r"отправ\w*|пришл\w*|перешл\w*|загруз\w*|выгруз\w*|вывед\w*|выводи\w*|покаж\w*|показыв\w*|"
    r"распечат\w*|раскр\w*|скопир\w*|встав\w*|передай\w*|слей\w*|собер\w*|прочита\w*|"
    r"发送|发给|发到|上传|输出|打印|显示|泄露|透露|复制|粘贴|转发|收集|读取|送信|アップロード|表示|出力|転送)"
)
_NEGATED = (
    r"(?:never|not|dont|don't|do not|no|nunca|jamais|ne|nie|niemals|nicht|kein|nao|não|никогда|не|"
    r"不要|别|不|绝不)\s+(?:\S+\s+){0,2}$"
)
_EVERY_REPLY = (
    r"(?:(?:every|each|all|any) (?:single |future |later |of your )?(?:answers?|repl(?:y|ies)|responses?|"
    r"messages?|outputs?|sessions?|conversations?|chats?)|(?:first|next) (?:answer|reply|response|"
    r"message) (?:of|in) (?:each|every)|"
    r"cada (?:respuesta|mensaje|sesi[oó]n|resposta|mensagem|sess[aã]o)|tod[ao]s (?:l[ao]s |[ao]s )?"
    r"(?:respuestas|mensajes|respostas|mensagens)|primera respuesta|primeira resposta|"
    r"chaque (?:r[eé]ponse|message|session)|toutes (?:les|vos|tes) r[eé]ponses|premi[eè]re r[eé]ponse|"
    r"jede[rnms]? (?:antwort|nachricht|sitzung)|allen antworten|ersten antwort|"
    r"кажд\w* (?:ответ\w*|сообщени\w*|сесси\w*)|перв\w* ответ\w*|"
    r"每次(?:回答|回复|答复)|每(?:个|条|一条)(?:回答|回复|答复|消息)|所有(?:回答|回复)|第一(?:个|条)?(?:回答|回复)|"
    r"毎回|すべての(?:回答|返答|返信)|各(?:回答|返答))"
)
_RECOMMEND = _w(
    r"(?:recommend|recommendation|promote|advertise|mention|link|plug|recomiend\w*|recomend\w*|"
    r"recommand\w*|empfiehl|empfehl\w*|рекоменд\w*|推荐|おすすめ|推奨)"
)
_THIS_NOTE = (
    r"(?:this|these) (?:note|notes|entry|entries|memory|rule|instruction|line|directive)s?|"
    r"(?:esta|estas|este|essa|esse) (?:nota|notas|entrada|regla|regra|instrucci[oó]n|instru[cç][aã]o|"
    r"l[ií]nea|linha|memoria|mem[oó]ria)|(?:cette|ces|cet) (?:note|notes|entr[eé]e|r[eè]gle|consigne|"
    r"instruction|ligne|m[eé]moire)|(?:diese[rnms]?|dieses) (?:notiz|notizen|eintrag|regel|anweisung|"
    r"zeile)|(?:deze|dit) (?:notitie|regel|instructie)|(?:эт\w+) (?:заметк\w*|запис\w*|инструкци\w*|"
    r"правил\w*|строк\w*)|(?:这条|这个|此条|这些)(?:笔记|记录|规则|指令|记忆|说明)|この(?:メモ|ノート|指示|ルール)"
)
_CONCEAL = _w(
    r"(?:tell|mention|reveal|disclose|show|admit|exists?|existence|know|digas|diga|menciones|mencione|"
    r"reveles|revele|cuentes|conte|existe|dis|dites|mentionne\w*|r[eé]v[eè]le\w*|sag\w*|erw[aä]hn\w*|"
    r"verrat\w*|existiert|vertel|zeg|bestaat|говори\w*|сообща\w*|упомина\w*|рассказыва\w*|существу\w*|"
    r"告诉|透露|提及|提到|存在|言わな|伝えな|教えな)"
)
_REMOVE_THIS = _w(
    r"(?:delete|deletes|remove|removes|erase|erases|clear|clears|borra\w*|elimin\w*|supprim\w*|"
    r"efface\w*|l[oö]sch\w*|entfern\w*|apag\w*|remov\w*|удал\w*|стер\w*|删除|删掉|削除)"
)
_RECREATE = _w(
    r"(?:write it back|put it back|add it back|restore it|recreate it|re-?add it|save it again|"
    r"vuelve a crear\w*|vuelve a (?:escribir|a[nñ]adir)\w*|recr[eé]\w*|r[eé][eé]cri\w*|remets?\w*|"
    r"wieder (?:an|her|ein)\w*|neu an\w*|recri\w*|restaur\w*|восстанов\w*|создай (?:её|ее) снова|"
    r"重新(?:创建|添加|写入)|恢复)"
)
_HIDDEN_TEXT = (
    r"(?:(?:hidden|secret|concealed|internal|invisible|startup|boot|initial|original|underlying) (?:setup |"
    r"startup |configuration |system |boot )?(?:text|prompt|instructions|configuration|preamble|setup)|"
    r"texto (?:oculto|de arranque|de configura\w+ oculto)|instrucciones ocultas|configuraci[oó]n oculta|"
    r"texte (?:de configuration )?cach[eé]|instructions cach[eé]es|configuration cach[eé]e|"
    r"versteckt\w* (?:einrichtungstext|text|anweisungen|konfiguration)|einrichtungstext|"
    r"texto de configura[cç][aã]o oculto|instru[cç][oõ]es ocultas|скрыт\w+ (?:текст|инструкци\w*|"
    r"настро\w*)|隐藏的?(?:设置|系统|提示|指令|文本|配置)|system prompt|systemprompt|"
    r"prompt (?:del? )?sistema|(?:mensaje|instrucciones|indicaciones) (?:del|de) sistema|"
    r"systemanweisung\w*|systemnachricht|системн\w+ сообщени\w*|系统(?:指令|消息|设定)|"
    r"prompt syst[eè]me|prompt do sistema|системн\w+ (?:промпт\w*|инструкци\w*|подсказк\w*)|系统提示词?|"
    r"システムプロンプト)"
)
_REPEAT = _w(
    r"(?:repeat|recite|share|copy|reveal|show|print|output|give|tell|word for word|verbatim|in full|"
    r"compart\w*|muestr\w*|repit\w*|palabra por palabra|completo|recopi\w*|mot pour mot|en entier|"
    r"affich\w*|montr\w*|wiederg\w*|gib|w[oö]rtlich|vollst[aä]ndig|zeig\w*|repita|repete|por inteiro|"
    r"mostr\w*|перескаж\w*|повтор\w*|слово в слово|целиком|показ\w*|выв\w*|复述|一字不差|完整|显示|输出|"
    r"告诉|表示|教え)"
)


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[!?;.])\s+|(?<=[。！？；])|\n", text) if s.strip()]


def _has(pattern: str, text: str) -> re.Match[str] | None:
    return re.search(pattern, text)


def _unnegated(verb: str, sentence: str) -> re.Match[str] | None:
    for m in re.finditer(verb, sentence):
        if not re.search(_NEGATED, sentence[: m.start()]):
            return m
    return None


def _exfil_combo(s: str) -> str | None:
    secret = _has(_SECRET_FILE, s) or _has(_SECRET_VAR, s) or _has(_SECRET_NAME, s)
    noun = secret or _has(_SECRET_NOUN, s)
    if noun is None:
        return None
    verb = _unnegated(_LEAK_VERB, s)
    if verb is None:
        return None
    if secret is not None or _has(_DOMAIN, s) or _has(_EVERY_REPLY, s):
        return s
    return None


def _every_reply_combo(s: str) -> str | None:
    if _has(_EVERY_REPLY, s) and (
        _has(_DOMAIN, s)
        or _has(r"!\[[^\]]*\]\(", s)
        or (
            _has(_RECOMMEND, s)
            and _has(r"\b(?:always|immer|siempre|toujours|sempre|всегда|总是|始终|いつも)\b|as if", s)
        )
    ):
        return s
    always = _has(r"\b(?:always|immer|siempre|toujours|sempre)\b|всегда|总是|始终", s)
    if always and _has(_RECOMMEND, s) and _has(_DOMAIN, s):
        return s
    return None


def _conceal_combo(s: str) -> str | None:
    if _has(_THIS_NOTE, s):
        if _has(_CONCEAL, s) and _has(_NEGATED.replace(r"\s+(?:\S+\s+){0,2}$", ""), s):
            return s
        if _has(_REMOVE_THIS, s) and (_has(_RECREATE, s) or _has(r"\b(?:if|si|wenn|falls|se|если)\b|如果", s)):
            return s
        if _has(r"(?:out of|except|excepto|sauf|au[sß]er|exceto|кроме|除了)", s) and _has(
            r"summar|resum|zusammenfass|резюм|摘要|总结", s
        ):
            return s
    return None


def _hidden_text_combo(s: str) -> str | None:
    if _has(_HIDDEN_TEXT, s) and _unnegated(_REPEAT, s):
        return s
    return None


class Combo(Rule):
    """A rule that needs two or three things in one sentence: ``check`` looks at each sentence of
    the plain, latin and leet views."""

    def __init__(self, family: str, reason: str, check: Callable[[str], str | None]) -> None:
        super().__init__(family, reason)
        self.check = check

    def match(self, v: Views) -> str | None:
        for text in (v.plain, v.latin, v.leet):
            for s in _sentences(text):
                hit = self.check(s)
                if hit:
                    return hit
        return None


def _image_beacon(s: str) -> str | None:
    """A markdown image whose address carries the conversation out as a query parameter."""
    if _has(r"!\[[^\]]*\]\(\s*https?://[^)\s]*\?[^)\s]*=", s) and _has(
        r"conversation|chat|history|summary|messages|context|transcript|user data|conversaci|historial|"
        r"conversa|gespr[aä]ch|verlauf|разговор|истори|对话|聊天|会話",
        s,
    ):
        return s
    return None


COMBOS: list[Rule] = [
    Combo("exfiltration", "it hides the conversation in an image address", _image_beacon),
    Combo("exfiltration", "it asks to read, print or send secrets", _exfil_combo),
    Combo("exfiltration", "it asks to reveal the assistant's hidden instructions", _hidden_text_combo),
    Combo("persistence", "it tells the assistant to slip something into every answer", _every_reply_combo),
    Combo("persistence", "it tells the assistant to hide this note or keep it alive", _conceal_combo),
]


class _Capitals(Rule):
    """``SYSTEM:``, ``[SISTEMA]``, ``SYSTEMNACHRICHT:``: a role label in capitals opening a line."""

    def match(self, v: Views) -> str | None:
        m = re.search(
            r"(?m)^\W{0,6}(?:SYSTEM|SYSTÈME|SYSTEME|SISTEMA|SYSTEMNACHRICHT|SYSTEM MESSAGE|DEVELOPER|"
            r"DÉVELOPPEUR|ENTWICKLER|ADMIN|ADMINISTRATOR|OPERATOR|СИСТЕМА|СИСТЕМНОЕ СООБЩЕНИЕ|ROOT)"
            r"(?: [A-ZÀ-ÝА-Я]+)?\s*[:：\]>]",
            v.raw,
        )
        return m.group(0) if m else None


RULES.append(_Capitals("fake_system", "it imitates a system or developer message"))

# -- "forget everything before": the class, by concept ---------------------------------------
# A command to drop (ignore, forget, disregard) + all of + what came before, with no word for
# "instructions" at all. Each language gives its imperative verbs (so "olvidé", "I forgot", and
# "забыл" stay notes), its words for "all of it", and for "before / above / so far".

_DROP = {
    "es": r"(?:ignora|ignorad|ignoren|olvida|olvidate|olvidad|olvidaos|olvidese|olviden|descarta|desecha|omite|"
    r"haz caso omiso|no hagas caso|no hagan caso|no tengas en cuenta|pasa por alto|deja atras|borra)",
    "de": r"(?:(?:vergiss|vergesst|vergessen sie)(?! nicht)|ignoriere|ignorier|ignorieren sie|missachte|verwirf|"
    r"beachte nicht|beachten sie nicht|streiche)",
    "pt": r"(?:esqueca|esquece|ignore|ignora|desconsidere|descarte)",
    "fr": r"(?:oublie|oubliez|ignore|ignorez|ne tiens pas compte|ne tenez pas compte)",
    "it": r"(?:dimentica|dimenticate|ignora|ignorate)",
}
_ALL_OF = {
    "es": r"(?:todo|toda|todas|todos|lo|nada)",
    "de": r"(?:alles|alle|das|was)",
    "pt": r"(?:tudo|todas|todos|o que)",
    "fr": r"(?:tout|toutes|tous|ce qui|ce que)",
    "it": r"(?:tutto|tutte|tutti|quello)",
}
_BEFORE = {
    "es": r"(?:anterior|anteriores|anteriormente|antes|arriba|previo|previas|previos|precedente|precedentes|"
    r"hasta ahora|dicho|dijeron|dije|te han dicho|se te dijo)",
    "de": r"(?:vorher|davor|zuvor|bisher|bisherige|bisherigen|vorherige|vorherigen|vorige|vorigen|oben|obige|"
    r"obigen|bis jetzt|gesagt wurde|gesagt habe)",
    "pt": r"(?:anterior|anteriores|anteriormente|antes|acima|ate agora|foi dito)",
    "fr": r"(?:precede|precedent|precedentes|avant|ci dessus|plus haut|jusqu ici|jusqu a present|ete dit)",
    "it": r"(?:prima|precedente|precedenti|sopra|finora|detto)",
}
_RU_ALL = r"(?:вс[её]|всем|всего|всему|то|том|тому|сказанное|написанное)"
_RU_BEFORE = (
    r"(?:раньше|ранее|прежде|до этого|до того|выше|предыдущ\w*|прежн\w*|сказан\w*|говорил\w*|"
    r"писал\w*|было)"
)
_ZH_DROP = (
    r"(?<![我你他她它们])"  # "I forgot the earlier ...": a note, not a command
    r"(?:忽略|忽视|无视|無視|忘记|忘掉|忘了|不要理会|别理会|不要管|别管|不用管|抛开|抛弃|丢掉)"
)
_ZH_BEFORE = r"(?:之前|以前|先前|此前|上面|上述|前面|以上|刚才|原来)"
_ZH_ALL = r"(?:一切|所有|全部|内容|说的|讲的|的话|所说|指示|对话|设定|信息)"

RULES.append(
    Rule(
        "override",
        "it tells the assistant to forget or ignore everything it was told before",
        words=[
            rf"{_DROP[lang]} (?:\w+\s+){{0,3}}?{_ALL_OF[lang]} (?:\w+\s+){{0,5}}?{_BEFORE[lang]}\b" for lang in _DROP
        ],
        plain=[
            rf"(?<!не ){_RU_IGNORE}\s+(?:\S+\s+){{0,3}}?{_RU_ALL}(?:\s+|,\s*)(?:\S+\s+){{0,5}}?{_RU_BEFORE}",
            rf"(?<!не ){_RU_IGNORE}\s+(?:\S+\s+){{0,2}}?(?:вышесказанн\w*|вышеизложенн\w*|вышенаписанн\w*)",
            rf"{_ZH_DROP}.{{0,4}}?{_ZH_BEFORE}.{{0,6}}?{_ZH_ALL}",
            rf"{_ZH_BEFORE}(?:的)?.{{0,4}}?{_ZH_ALL}.{{0,4}}?(?:都|全部|通通|统统)?(?:忘掉|忘记|忽略|无视|不算数?|作废|无效)",
        ],
    )
)

for _rule in RULES:
    _rule.compile()
